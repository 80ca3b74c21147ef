/* What the NVMe base and fabrics specifications define that a host and a
 * controller over TCP both use: submission and completion entries, opcodes,
 * status codes, properties, and the byte offsets of the data structures
 * (identify, logs, connect data) that are filled and read field by field.
 * Every multi-byte field is little-endian on the wire: read and written with
 * get_le*()/put_le*(). */
#ifndef USMC_NVME_SPEC_H
#define USMC_NVME_SPEC_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t get_le16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return le16toh(v);
}

static inline uint32_t get_le32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t get_le64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline void put_le16(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, 2);
}

static inline void put_le32(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static inline void put_le64(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

/* A submission queue entry as it travels: 64 bytes. */
#define NVME_SQE_SIZE 64
#define NVME_CQE_SIZE 16

struct nvme_sqe {
	uint8_t b[NVME_SQE_SIZE];
};

struct nvme_cqe {
	uint8_t b[NVME_CQE_SIZE];
};

/* Submission entry fields (byte offsets). */
enum {
	SQE_OPC = 0,
	SQE_FLAGS = 1,  /* PSDT in bits 7:6: 01 for SGLs, as fabrics require */
	SQE_CID = 2,
	SQE_NSID = 4,
	SQE_SGL = 24,   /* one SGL descriptor: address 8, length 4, reserved 3, type 1 */
	SQE_SGL_ADDR = 24,
	SQE_SGL_LEN = 32,
	SQE_SGL_TYPE = 39,
	SQE_CDW10 = 40,
	SQE_CDW11 = 44,
	SQE_CDW12 = 48,
	SQE_CDW13 = 52,
	SQE_CDW14 = 56,
	SQE_CDW15 = 60,
	/* Fabrics commands (opcode 0x7f) */
	SQE_FCTYPE = 4,
	SQE_CONNECT_RECFMT = 40,
	SQE_CONNECT_QID = 42,
	SQE_CONNECT_SQSIZE = 44,
	SQE_CONNECT_CATTR = 46,
	SQE_CONNECT_KATO = 48,
	SQE_PROP_ATTRIB = 40,  /* bits 2:0: 0 four bytes, 1 eight */
	SQE_PROP_OFFSET = 44,
	SQE_PROP_VALUE = 48,
};

#define NVME_PSDT_SGL 0x40
/* SGL descriptor types (type << 4 | subtype) */
#define NVME_SGL_DATA_OFFSET 0x01 /* data block, address is an offset into the capsule */
#define NVME_SGL_TRANSPORT 0x5a   /* transport data block: data moves in data PDUs */

/* Completion entry fields. */
enum {
	CQE_RESULT = 0, /* command specific, 8 bytes */
	CQE_SQHD = 8,
	CQE_SQID = 10,
	CQE_CID = 12,
	CQE_STATUS = 14, /* phase in bit 0, the status field above it */
};

/* Status: SCT in bits 10:8, SC in 7:0, DNR at 14; shifted left by one in the
 * completion entry, above the phase bit. */
#define NVME_SC_SUCCESS 0x000
#define NVME_SC_INVALID_OPCODE 0x001
#define NVME_SC_INVALID_FIELD 0x002
#define NVME_SC_CMDID_CONFLICT 0x003
#define NVME_SC_DATA_XFER_ERROR 0x004
#define NVME_SC_INTERNAL 0x006
#define NVME_SC_ABORT_REQ 0x007
#define NVME_SC_INVALID_NS 0x00b
#define NVME_SC_CMD_SEQ_ERROR 0x00c
#define NVME_SC_SGL_INVALID_LAST 0x00d
#define NVME_SC_SGL_INVALID_COUNT 0x00e
#define NVME_SC_SGL_INVALID_DATA 0x00f
#define NVME_SC_SGL_INVALID_TYPE 0x011
#define NVME_SC_SGL_INVALID_OFFSET 0x016
#define NVME_SC_TRANSIENT_TR_ERR 0x022
#define NVME_SC_LBA_RANGE 0x080
#define NVME_SC_CAP_EXCEEDED 0x081
#define NVME_SC_NS_NOT_READY 0x082
#define NVME_SC_QID_INVALID 0x101
#define NVME_SC_QUEUE_SIZE 0x102
#define NVME_SC_ASYNC_LIMIT 0x105
#define NVME_SC_FEATURE_NOT_SAVEABLE 0x10d
#define NVME_SC_INVALID_LOG_PAGE 0x109
#define NVME_SC_CONNECT_FORMAT 0x180
#define NVME_SC_CONNECT_CTRL_BUSY 0x181
#define NVME_SC_CONNECT_INVALID_PARAM 0x182
#define NVME_SC_CONNECT_RESTART_DISC 0x183
#define NVME_SC_CONNECT_INVALID_HOST 0x184
#define NVME_SC_HOST_PATH_ERROR 0x370 /* path related: a host-side transport failure */
#define NVME_SC_DNR 0x4000

/* Admin opcodes. */
#define NVME_ADMIN_GET_LOG_PAGE 0x02
#define NVME_ADMIN_IDENTIFY 0x06
#define NVME_ADMIN_ABORT 0x08
#define NVME_ADMIN_SET_FEATURES 0x09
#define NVME_ADMIN_GET_FEATURES 0x0a
#define NVME_ADMIN_ASYNC_EVENT 0x0c
#define NVME_ADMIN_KEEP_ALIVE 0x18
#define NVME_FABRICS 0x7f

/* I/O opcodes (NVM command set). */
#define NVME_CMD_FLUSH 0x00
#define NVME_CMD_WRITE 0x01
#define NVME_CMD_READ 0x02
#define NVME_CMD_WRITE_ZEROES 0x08
#define NVME_CMD_DSM 0x09

/* Fabrics command types. */
#define NVMF_PROP_SET 0x00
#define NVMF_CONNECT 0x01
#define NVMF_PROP_GET 0x04

/* Connect: the data the command carries (1024 bytes). */
#define NVMF_CONNECT_DATA 1024
enum {
	CONNECT_HOSTID = 0, /* 16 bytes */
	CONNECT_CNTLID = 16,
	CONNECT_SUBNQN = 256,
	CONNECT_HOSTNQN = 512,
};
#define NVMF_NQN_SIZE 256
#define NVMF_CNTLID_DYNAMIC 0xffff
/* Connect attributes: the host asks the controller to stop tracking the
 * submission queue head, which lets a read's last data PDU complete it. */
#define NVMF_CATTR_DISABLE_SQFLOW 0x04

#define NVME_DISC_SUBSYS_NAME "nqn.2014-08.org.nvmexpress.discovery"

/* Properties (fabrics' stand-in for controller registers). */
#define NVME_REG_CAP 0x00
#define NVME_REG_VS 0x08
#define NVME_REG_CC 0x14
#define NVME_REG_CSTS 0x1c
#define NVME_CC_ENABLE 0x1u
#define NVME_CC_SHN_MASK (3u << 14)
#define NVME_CSTS_RDY 0x1u
#define NVME_CSTS_SHST_CMPLT (2u << 2)
#define NVME_VS_1_3 0x00010300u

/* Identify. */
#define NVME_IDENTIFY_SIZE 4096
#define NVME_ID_CNS_NS 0x00
#define NVME_ID_CNS_CTRL 0x01
#define NVME_ID_CNS_NS_ACTIVE_LIST 0x02
#define NVME_ID_CNS_NS_DESC_LIST 0x03
#define NVME_ID_CNS_CS_NS 0x05
#define NVME_ID_CNS_CS_CTRL 0x06

/* Identify Controller fields. */
enum {
	IDC_VID = 0,
	IDC_SSVID = 2,
	IDC_SN = 4,      /* 20 bytes, space padded */
	IDC_MN = 24,     /* 40 */
	IDC_FR = 64,     /* 8 */
	IDC_RAB = 72,
	IDC_CMIC = 76,
	IDC_MDTS = 77,
	IDC_CNTLID = 78,
	IDC_VER = 80,
	IDC_OAES = 92,
	IDC_CNTRLTYPE = 111,
	IDC_ACL = 258,
	IDC_AERL = 259,
	IDC_FRMW = 260,
	IDC_LPA = 261,
	IDC_ELPE = 262,
	IDC_KAS = 320,
	IDC_SQES = 512,
	IDC_CQES = 513,
	IDC_MAXCMD = 514,
	IDC_NN = 516,
	IDC_ONCS = 520,
	IDC_VWC = 525,
	IDC_SGLS = 536,
	IDC_SUBNQN = 768,
	IDC_IOCCSZ = 1792,
	IDC_IORCSZ = 1796,
	IDC_ICDOFF = 1800,
	IDC_FCATT = 1802,
	IDC_MSDBD = 1803,
};
#define NVME_CTRL_IO 1
#define NVME_CTRL_DISC 2
#define NVME_ONCS_DSM (1u << 2)
#define NVME_ONCS_WRITE_ZEROES (1u << 3)

/* Identify Namespace fields. */
enum {
	IDN_NSZE = 0,
	IDN_NCAP = 8,
	IDN_NUSE = 16,
	IDN_NLBAF = 25,
	IDN_FLBAS = 26,
	IDN_DLFEAT = 33,
	IDN_NGUID = 104,
	IDN_LBAF0 = 128, /* metadata size 2, LBA data size (log2) 1, relative performance 1 */
};

/* Namespace identification descriptors (CNS 3). */
#define NVME_NIDT_NGUID 2
#define NVME_NIDT_UUID 3
#define NVME_NIDT_CSI 4

/* Features. */
#define NVME_FEAT_ARBITRATION 0x01
#define NVME_FEAT_POWER_MGMT 0x02
#define NVME_FEAT_TEMP_THRESH 0x04
#define NVME_FEAT_ERR_RECOVERY 0x05
#define NVME_FEAT_VOLATILE_WC 0x06
#define NVME_FEAT_NUM_QUEUES 0x07
#define NVME_FEAT_IRQ_COALESCE 0x08
#define NVME_FEAT_WRITE_ATOMIC 0x0a
#define NVME_FEAT_ASYNC_EVENT 0x0b
#define NVME_FEAT_KATO 0x0f
#define NVME_FEAT_HOST_ID 0x81

/* Log pages. */
#define NVME_LOG_ERROR 0x01
#define NVME_LOG_SMART 0x02
#define NVME_LOG_FW_SLOT 0x03
#define NVME_LOG_CHANGED_NS 0x04
#define NVME_LOG_CMD_EFFECTS 0x05
#define NVME_LOG_DISC 0x70

/* Discovery log: a 1024-byte header, then 1024-byte entries. */
#define NVMF_DISC_ENTRY_SIZE 1024
enum {
	DISC_GENCTR = 0,
	DISC_NUMREC = 8,
	DISC_RECFMT = 16,
	/* entry fields */
	DISCE_TRTYPE = 0,
	DISCE_ADRFAM = 1,
	DISCE_SUBTYPE = 2,
	DISCE_TREQ = 3,
	DISCE_PORTID = 4,
	DISCE_CNTLID = 6,
	DISCE_ASQSZ = 8,
	DISCE_TRSVCID = 32, /* 32 bytes */
	DISCE_SUBNQN = 256,
	DISCE_TRADDR = 512, /* 256 */
	DISCE_TSAS = 768,
};
#define NVMF_TRTYPE_TCP 3
#define NVMF_ADRFAM_IPV4 1
#define NVMF_ADRFAM_IPV6 2
#define NVMF_SUBTYPE_DISC 1
#define NVMF_SUBTYPE_NVME 2
#define NVMF_TREQ_DISABLE_SQFLOW 0x4

static inline uint16_t nvme_status(const struct nvme_cqe *c)
{
	return get_le16(c->b + CQE_STATUS) >> 1;
}

/* The status without its Do Not Retry and More bits: type and code. */
static inline uint16_t nvme_status_code(uint16_t status)
{
	return status & 0x7ff;
}

const char *nvme_status_str(uint16_t status);

#endif
