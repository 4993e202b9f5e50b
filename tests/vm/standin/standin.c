// SPDX-License-Identifier: GPL-2.0
/*
 * standin: a stand-in for the nvidia host driver, for hostprep's VM integration tests.
 *
 * Binds QEMU's "edu" device (PCI 1234:11e8). It mimics the parts of nvidia that matter to a
 * driver switcher:
 *   - probe() creates a char device /dev/standin<N> (a misc device; devtmpfs makes the node);
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

struct standin_dev {
	struct pci_dev *pdev;
	struct miscdevice misc;
	char name[32];
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
	sd->index = ida_alloc(&standin_ida, GFP_KERNEL);
	if (sd->index < 0) {
		ret = sd->index;
		goto err_free;
	}
	snprintf(sd->name, sizeof(sd->name), "standin%d", sd->index);
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
	ida_free(&standin_ida, sd->index);
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
	ida_free(&standin_ida, sd->index);
	dev_info(&pdev->dev, "standin: unbound /dev/%s\n", sd->name);
	kfree(sd);
}

static const struct pci_device_id standin_ids[] = {
	{ PCI_DEVICE(0x1234, 0x11e8) },	/* QEMU edu */
	{ }
};
MODULE_DEVICE_TABLE(pci, standin_ids);

static struct pci_driver standin_driver = {
	.name = "standin",
	.id_table = standin_ids,
	.probe = standin_probe,
	.remove = standin_remove,
};
module_pci_driver(standin_driver);

MODULE_DESCRIPTION("hostprep test stand-in for the nvidia host driver (binds QEMU edu)");
MODULE_LICENSE("GPL");
