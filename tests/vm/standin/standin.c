// SPDX-License-Identifier: GPL-2.0
/*
 * standin: a stand-in for the nvidia host driver, for hostprep's VM integration tests.
 *
 * Like nvidia.ko, one module registers two PCI drivers (nvidia.ko's are "nvidia" for GPUs and
 * "nvidia-nvswitch" for NVSwitches, NVSWITCH_DRIVER_NAME in NVIDIA/open-gpu-kernel-modules,
 * kernel-open/nvidia/linux_nvswitch.h):
 *   - "standin" binds QEMU's "edu" device (PCI 1234:11e8, docs/specs/edu.rst), the GPUs;
 *   - "standin-switch" binds QEMU's "tpci200" (TEWS TPCI200 IndustryPack carrier, PCI
 *     1498:30c8, class 0x0680 "bridge, other" as an NVSwitch's; hw/ipack/tpci200.c), the
 *     NVSwitch. Debian's kernels build no driver of their own for it (CONFIG_IPACK_BUS is off).
 * The kernel links each driver to the module (/sys/bus/pci/drivers/<driver>/module ->
 * /sys/module/standin, drivers/base/module.c), which is how hostprep tells a module's drivers.
 * Both drivers mimic the parts of nvidia that matter to a driver switcher:
 *   - probe() creates a char device /dev/standin<N>, or /dev/standin-switch<N> for the switch (a
 *     misc device; devtmpfs makes the node; nvidia-nvswitch makes /dev/nvidia-nvswitch<N>);
 *   - remove() blocks while any of those nodes is open (nvidia's remove loops while its usage
 *     count is non-zero), so an unbind write hangs until the last holder closes its fd;
 *   - module parameter remove_delay_ms (writable at runtime) delays remove() to model a slow
 *     teardown;
 *   - module parameter refuse_probe (writable at runtime, a PCI address) makes probe() of that
 *     device fail with -EIO, so a switch back to the host driver fails half-way on a real kernel;
 *   - module parameter stall_probe (writable at runtime, a PCI address) makes probe() of that
 *     device wait until the parameter names it no more, as a GPU that does not come up holds
 *     nvidia's probe (with the device lock taken by the driver core).
 */
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/wait.h>
#include <linux/delay.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

static unsigned int remove_delay_ms;
module_param(remove_delay_ms, uint, 0644);
MODULE_PARM_DESC(remove_delay_ms, "Sleep this long in remove() before tearing down");

static char refuse_probe[32];
module_param_string(refuse_probe, refuse_probe, sizeof(refuse_probe), 0644);
MODULE_PARM_DESC(refuse_probe, "probe() of this PCI address fails with -EIO");

static char stall_probe[32];
module_param_string(stall_probe, stall_probe, sizeof(stall_probe), 0644);
MODULE_PARM_DESC(stall_probe, "probe() of this PCI address waits until this names it no more");

static DEFINE_IDA(standin_ida);
static DEFINE_IDA(standin_switch_ida);

/* What each driver names its nodes, by pci_device_id.driver_data. */
struct standin_kind {
	const char *prefix;
	struct ida *ida;
};
static const struct standin_kind standin_kinds[] = {
	{ "standin", &standin_ida },			/* 0: the GPUs */
	{ "standin-switch", &standin_switch_ida },	/* 1: the NVSwitch */
};

struct standin_dev {
	struct pci_dev *pdev;
	struct miscdevice misc;
	char name[32];
	const struct standin_kind *kind;
	int index;
	spinlock_t lock;
	int open_count;
	bool dying;
	wait_queue_head_t wq;
};

static int standin_open(struct inode *inode, struct file *file)
{
	/* misc_open() stored the miscdevice in private_data. */
	struct standin_dev *sd = container_of(file->private_data, struct standin_dev, misc);
	int ret = 0;

	spin_lock(&sd->lock);
	if (sd->dying)
		ret = -ENODEV;
	else
		sd->open_count++;
	spin_unlock(&sd->lock);
	file->private_data = sd;
	return ret;
}

static int standin_release(struct inode *inode, struct file *file)
{
	struct standin_dev *sd = file->private_data;

	spin_lock(&sd->lock);
	sd->open_count--;
	spin_unlock(&sd->lock);
	wake_up(&sd->wq);
	return 0;
}

static const struct file_operations standin_fops = {
	.owner = THIS_MODULE,
	.open = standin_open,
	.release = standin_release,
	.llseek = noop_llseek,
};

/* True (and marks the device dying, so no new opens) once nobody holds it open. */
static bool standin_idle(struct standin_dev *sd)
{
	bool idle;

	spin_lock(&sd->lock);
	idle = sd->open_count == 0;
	if (idle)
		sd->dying = true;
	spin_unlock(&sd->lock);
	return idle;
}

static int standin_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	const struct standin_kind *kind = &standin_kinds[id->driver_data];
	struct standin_dev *sd;
	int ret;

	if (refuse_probe[0] && sysfs_streq(refuse_probe, pci_name(pdev))) {
		dev_info(&pdev->dev, "standin: probe refused (refuse_probe)\n");
		return -EIO;
	}
	if (stall_probe[0] && sysfs_streq(stall_probe, pci_name(pdev))) {
		dev_info(&pdev->dev, "standin: probe stalled (stall_probe)\n");
		while (sysfs_streq(stall_probe, pci_name(pdev)))
			msleep(20);
	}
	sd = kzalloc(sizeof(*sd), GFP_KERNEL);
	if (!sd)
		return -ENOMEM;
	sd->pdev = pdev;
	spin_lock_init(&sd->lock);
	init_waitqueue_head(&sd->wq);
	sd->kind = kind;
	sd->index = ida_alloc(kind->ida, GFP_KERNEL);
	if (sd->index < 0) {
		ret = sd->index;
		goto err_free;
	}
	snprintf(sd->name, sizeof(sd->name), "%s%d", kind->prefix, sd->index);
	sd->misc.minor = MISC_DYNAMIC_MINOR;
	sd->misc.name = sd->name;
	sd->misc.fops = &standin_fops;
	sd->misc.parent = &pdev->dev;
	ret = misc_register(&sd->misc);
	if (ret)
		goto err_ida;
	pci_set_drvdata(pdev, sd);
	dev_info(&pdev->dev, "standin: bound, /dev/%s\n", sd->name);
	return 0;

err_ida:
	ida_free(kind->ida, sd->index);
err_free:
	kfree(sd);
	return ret;
}

static void standin_remove(struct pci_dev *pdev)
{
	struct standin_dev *sd = pci_get_drvdata(pdev);
	unsigned int delay = READ_ONCE(remove_delay_ms);

	if (delay) {
		dev_info(&pdev->dev, "standin: remove delayed %u ms\n", delay);
		msleep(delay);
	}
	if (!standin_idle(sd)) {
		dev_info(&pdev->dev, "standin: /dev/%s is open, remove waits\n", sd->name);
		wait_event(sd->wq, standin_idle(sd));
	}
	misc_deregister(&sd->misc);
	ida_free(sd->kind->ida, sd->index);
	dev_info(&pdev->dev, "standin: unbound /dev/%s\n", sd->name);
	kfree(sd);
}

static const struct pci_device_id standin_ids[] = {
	{ PCI_DEVICE(0x1234, 0x11e8), .driver_data = 0 },	/* QEMU edu */
	{ }
};
MODULE_DEVICE_TABLE(pci, standin_ids);

static const struct pci_device_id standin_switch_ids[] = {
	{ PCI_DEVICE(0x1498, 0x30c8), .driver_data = 1 },	/* QEMU tpci200 */
	{ }
};
MODULE_DEVICE_TABLE(pci, standin_switch_ids);

static struct pci_driver standin_driver = {
	.name = "standin",
	.id_table = standin_ids,
	.probe = standin_probe,
	.remove = standin_remove,
};

static struct pci_driver standin_switch_driver = {
	.name = "standin-switch",
	.id_table = standin_switch_ids,
	.probe = standin_probe,
	.remove = standin_remove,
};

/* Two drivers, so no module_pci_driver(): registered in order, unregistered in reverse. */
static int __init standin_init(void)
{
	int ret = pci_register_driver(&standin_driver);

	if (ret)
		return ret;
	ret = pci_register_driver(&standin_switch_driver);
	if (ret)
		pci_unregister_driver(&standin_driver);
	return ret;
}

static void __exit standin_exit(void)
{
	pci_unregister_driver(&standin_switch_driver);
	pci_unregister_driver(&standin_driver);
}
module_init(standin_init);
module_exit(standin_exit);

MODULE_DESCRIPTION("hostprep test stand-in for the nvidia host driver (standin binds QEMU edu, standin-switch QEMU tpci200)");
MODULE_LICENSE("GPL");
