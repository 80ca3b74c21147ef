#include "spec.h"

#include <stdio.h>

const char *nvme_status_str(uint16_t status)
{
	static const struct {
		uint16_t code;
		const char *name;
	} names[] = {
		{NVME_SC_SUCCESS, "success"},
		{NVME_SC_INVALID_OPCODE, "invalid opcode"},
		{NVME_SC_INVALID_FIELD, "invalid field"},
		{NVME_SC_CMDID_CONFLICT, "command id conflict"},
		{NVME_SC_DATA_XFER_ERROR, "data transfer error"},
		{NVME_SC_INTERNAL, "internal error"},
		{NVME_SC_ABORT_REQ, "aborted"},
		{NVME_SC_INVALID_NS, "invalid namespace"},
		{NVME_SC_CMD_SEQ_ERROR, "command sequence error"},
		{NVME_SC_SGL_INVALID_LAST, "invalid SGL last segment"},
		{NVME_SC_SGL_INVALID_COUNT, "invalid SGL count"},
		{NVME_SC_SGL_INVALID_DATA, "invalid data SGL length"},
		{NVME_SC_SGL_INVALID_TYPE, "invalid SGL type"},
		{NVME_SC_SGL_INVALID_OFFSET, "invalid SGL offset"},
		{NVME_SC_TRANSIENT_TR_ERR, "transient transport error"},
		{NVME_SC_LBA_RANGE, "LBA out of range"},
		{NVME_SC_CAP_EXCEEDED, "capacity exceeded"},
		{NVME_SC_NS_NOT_READY, "namespace not ready"},
		{NVME_SC_QID_INVALID, "invalid queue id"},
		{NVME_SC_QUEUE_SIZE, "invalid queue size"},
		{NVME_SC_ASYNC_LIMIT, "asynchronous event request limit exceeded"},
		{NVME_SC_INVALID_LOG_PAGE, "invalid log page"},
		{NVME_SC_CONNECT_FORMAT, "incompatible connect format"},
		{NVME_SC_CONNECT_CTRL_BUSY, "controller busy"},
		{NVME_SC_CONNECT_INVALID_PARAM, "invalid connect parameters"},
		{NVME_SC_CONNECT_RESTART_DISC, "restart discovery"},
		{NVME_SC_CONNECT_INVALID_HOST, "invalid host"},
		{NVME_SC_HOST_PATH_ERROR, "host path error (the queue failed)"},
	};
	static _Thread_local char other[32];
	uint16_t code = nvme_status_code(status);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == code)
			return names[i].name;
	snprintf(other, sizeof(other), "status %#x", status);
	return other;
}
