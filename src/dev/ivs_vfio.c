/* The ivshmem device of a guest through vfio-pci, where it is bound to it: its
 * BAR 2 (the region) mapped cacheable, as sysfs's resource2 is not on x86; its
 * BAR 0 registers (IVPosition, our peer ID, and the doorbell); and, with
 * ivshmem-doorbell, its MSI-X vector 0 signalling an eventfd of ours
 * (ivs_doorbell.c). The guest needs an IOMMU for VFIO (QEMU's q35 with
 * intel-iommu, intremap=on, and intel_iommu=on); the device must have bus
 * mastering on, or its MSI-X writes never arrive, and nothing else sets it.
 *
 * A VFIO group is one process tree's at a time: another process of the guest
 * finds it busy and maps the region through sysfs, polling. */
#include "ivs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../core/sys.h"

/* BAR 0's registers (QEMU's ivshmem-spec). */
#define IVPOSITION 8
#define DOORBELL 12
#define PCI_COMMAND 4
#define PCI_COMMAND_MASTER 0x4

static struct {
	int dev;                      /* the device's descriptor, -1 without */
	volatile uint32_t *regs;      /* BAR 0 mapped, or NULL: written through dev */
	uint64_t regs_off;            /* BAR 0 in dev */
} vf = {.dev = -1};

static int region_info(int dev, uint32_t index, struct vfio_region_info *ri)
{
	*ri = (struct vfio_region_info){.argsz = sizeof(*ri), .index = index};
	return real.ioctl(dev, VFIO_DEVICE_GET_REGION_INFO, ri);
}

/* The device's descriptor from its group, in a container of its own; -errno. */
static int open_device(const char *dir, char *why, size_t len)
{
	char link[512], path[600];
	int container = -1, group = -1, dev = -EIO;

	snprintf(path, sizeof(path), "%s/iommu_group", dir);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n < 0) {
		snprintf(why, len, "%s: in no IOMMU group", dir);
		return -ENODEV;
	}
	link[n] = 0;
	snprintf(path, sizeof(path), "/dev/vfio/%s", basename(link));
	container = real.open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
	group = real.open(path, O_RDWR | O_CLOEXEC);
	struct vfio_group_status gs = {.argsz = sizeof(gs)};
	if (container < 0 || group < 0) {
		dev = -errno;
		snprintf(why, len, "%s: %s", group < 0 ? path : "/dev/vfio/vfio", strerror(errno));
	} else if (real.ioctl(group, VFIO_GROUP_GET_STATUS, &gs) < 0 ||
		   !(gs.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		snprintf(why, len, "%s: not viable (a device of its group is not bound to vfio-pci)",
			 path);
	} else if (real.ioctl(group, VFIO_GROUP_SET_CONTAINER, &container) < 0 ||
		   (real.ioctl(container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) < 0 &&
		    real.ioctl(container, VFIO_SET_IOMMU, VFIO_TYPE1_IOMMU) < 0)) {
		snprintf(why, len, "%s: no VFIO IOMMU: %s", path, strerror(errno));
	} else if ((dev = real.ioctl(group, VFIO_GROUP_GET_DEVICE_FD, basename((char *)dir))) < 0) {
		dev = -errno;
		snprintf(why, len, "%s: %s", dir, strerror(errno));
	}
	/* The device holds its group and container. */
	if (group >= 0)
		real.close(group);
	if (container >= 0)
		real.close(container);
	return dev;
}

/* MSI-X vector 0 to an eventfd, bus mastering on: -1 without interrupts. */
static int interrupts(int dev)
{
	struct vfio_irq_info ii = {.argsz = sizeof(ii), .index = VFIO_PCI_MSIX_IRQ_INDEX};
	struct vfio_region_info cfg;
	uint16_t cmd;

	if (real.ioctl(dev, VFIO_DEVICE_GET_IRQ_INFO, &ii) < 0 || ii.count < 1 ||
	    region_info(dev, VFIO_PCI_CONFIG_REGION_INDEX, &cfg) < 0 ||
	    pread(dev, &cmd, sizeof(cmd), (off_t)cfg.offset + PCI_COMMAND) != sizeof(cmd))
		return -1;
	cmd |= PCI_COMMAND_MASTER;
	if (pwrite(dev, &cmd, sizeof(cmd), (off_t)cfg.offset + PCI_COMMAND) != sizeof(cmd))
		return -1;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	char buf[sizeof(struct vfio_irq_set) + sizeof(int)];
	struct vfio_irq_set *set = (struct vfio_irq_set *)buf;
	*set = (struct vfio_irq_set){.argsz = sizeof(buf),
				     .flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
				     .index = VFIO_PCI_MSIX_IRQ_INDEX,
				     .count = 1};
	memcpy(set->data, &fd, sizeof(fd));
	if (fd < 0 || real.ioctl(dev, VFIO_DEVICE_SET_IRQS, set) < 0) {
		if (fd >= 0)
			real.close(fd);
		return -1;
	}
	return sys_fd_high(fd);
}

int ivs_vfio_open(const char *spec, struct region_map *m, char *why, size_t len)
{
	char dir[400], link[512], path[600];
	struct vfio_region_info bar0, bar2;

	if (region_pci_dir(spec, dir, sizeof(dir), why, len) <= 0)
		return 1;
	snprintf(path, sizeof(path), "%s/driver", dir);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n < 0 || (link[n] = 0, strcmp(basename(link), "vfio-pci")))
		return 1;
	int dev = open_device(dir, why, len);
	if (dev == -EBUSY) {
		/* Another process tree of this guest has it. */
		fprintf(stderr, "usmc: ivshmem: %s is another process's (vfio-pci): the region "
				"through sysfs, without interrupts\n",
			dir);
		return 1;
	}
	if (dev < 0)
		return -1;
	if (region_info(dev, VFIO_PCI_BAR0_REGION_INDEX, &bar0) < 0 ||
	    region_info(dev, VFIO_PCI_BAR2_REGION_INDEX, &bar2) < 0 || bar0.size < DOORBELL + 4 ||
	    bar2.size < REGION_PAGE || !(bar2.flags & VFIO_REGION_INFO_FLAG_MMAP)) {
		snprintf(why, len, "%s: its BARs through vfio-pci are not an ivshmem device's", dir);
		real.close(dev);
		return -1;
	}
	void *base = mmap(NULL, bar2.size, PROT_READ | PROT_WRITE, MAP_SHARED, dev, (off_t)bar2.offset);
	if (base == MAP_FAILED) {
		snprintf(why, len, "%s: cannot map BAR 2 through vfio-pci: %s", dir, strerror(errno));
		real.close(dev);
		return -1;
	}
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->base = base;
	m->size = bar2.size;
	m->vfio = 1;
	snprintf(m->pci, sizeof(m->pci), "%s", dir);
	snprintf(m->path, sizeof(m->path), "%s (vfio-pci)", dir);
	region_map_measure(m);
	vf.dev = sys_fd_high(dev);
	vf.regs_off = bar0.offset;
	if (bar0.flags & VFIO_REGION_INFO_FLAG_MMAP) {
		void *r = mmap(NULL, bar0.size, PROT_READ | PROT_WRITE, MAP_SHARED, vf.dev,
			       (off_t)bar0.offset);
		vf.regs = r == MAP_FAILED ? NULL : r;
	}
	uint32_t self;
	if (vf.regs)
		self = vf.regs[IVPOSITION / 4];
	else if (pread(vf.dev, &self, sizeof(self), (off_t)vf.regs_off + IVPOSITION) != sizeof(self))
		return 0;
	/* ivshmem-plain has neither a peer ID nor MSI-X: the region alone. */
	int irq = interrupts(vf.dev);
	if (irq >= 0 && self <= 0xffff)
		ivs_doorbell_guest(self, irq);
	return 0;
}

void ivs_vfio_ring(uint32_t peer)
{
	uint32_t v = peer << 16;

	if (vf.regs)
		vf.regs[DOORBELL / 4] = v;
	else if (pwrite(vf.dev, &v, sizeof(v), (off_t)vf.regs_off + DOORBELL) != sizeof(v)) {
		/* the device is gone: the peer polls */
	}
}
