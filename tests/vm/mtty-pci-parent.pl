#!/usr/bin/perl -0777 -p
# The kernel's mtty sample (samples/vfio-mdev/mtty.c), with one addition for the harness: a
# `parent=DDDD:BB:DD.F` module parameter that registers mtty's mdev parent on that PCI function
# (the stand-in GPU) instead of mtty's own virtual device. NVIDIA's vGPU manager registers its
# parents on PCI functions (the PF, or each VF), and hostprep's vGPU parents are PCI functions,
# so this lets `hostprep prepare --mode vm-vgpu` create and remove mtty devices through the real
# kernel's mdev core. Without the parameter the module is the sample as it ships.
#   perl tests/vm/mtty-pci-parent.pl mtty.c > mtty-pci.c   (dies when the source no longer fits)
my $n = 0;
$n += s{(static int __init mtty_dev_init\(void\))}{/* hostprep harness: the mdev parent on a PCI function (parent=DDDD:BB:DD.F). */
static char *parent;
module_param(parent, charp, 0444);
MODULE_PARM_DESC(parent, "register the mdev parent on this PCI function");
static struct pci_dev *mtty_pci_parent;
static struct device *mtty_parent_dev;

static int mtty_find_parent(void)
{
	unsigned int d, b, s, f;

	mtty_parent_dev = &mtty_dev.dev;
	if (!parent || !*parent)
		return 0;
	if (sscanf(parent, "%x:%x:%x.%x", &d, &b, &s, &f) != 4)
		return -EINVAL;
	mtty_pci_parent = pci_get_domain_bus_and_slot(d, b, PCI_DEVFN(s, f));
	if (!mtty_pci_parent)
		return -ENODEV;
	mtty_parent_dev = &mtty_pci_parent->dev;
	return 0;
}

static void mtty_put_parent(void)
{
	if (mtty_pci_parent)
		pci_dev_put(mtty_pci_parent);
	mtty_pci_parent = NULL;
}

$1};
$n += s{ret = mdev_register_parent\(&mtty_dev\.parent, &mtty_dev\.dev,}{ret = mtty_find_parent() ?: mdev_register_parent(&mtty_dev.parent, mtty_parent_dev,};
$n += s{\nerr_device:\n}{\nerr_device:\n\tmtty_put_parent();\n};
$n += s{(mdev_unregister_parent\(&mtty_dev\.parent\);\n)}{$1\tmtty_put_parent();\n};
die "mtty-pci-parent.pl: mtty.c no longer has the expected shape ($n of 4 edits applied)\n" if $n != 4;
