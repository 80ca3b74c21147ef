#include "decline.h"

static const struct {
	uint32_t code;
	const char *name;
} table[DECL_MAX] = {
	[DECL_PEER_NO_USMC] = {0x03010000u, "peer_not_usmc"},
	[DECL_NO_PROPOSAL] = {0x03010000u, "client_not_usmc"},
	[DECL_NO_DEVICE] = {0x03030000u, "no_device"},
	[DECL_MEMORY] = {0x01010000u, "memory"},
	[DECL_BINDING] = {0x03070000u, "binding_mismatch"},
	[DECL_PEER_DECLINED] = {0x05000000u, "peer_declined"},
	[DECL_TIMEOUT] = {0x02010000u, "timeout"},
	[DECL_PEER_SPOKE_TCP] = {0x04000000u, "peer_spoke_tcp"},
	[DECL_AMBIGUOUS] = {0x0303000au, "ambiguous_listener"},
	[DECL_PROTOCOL] = {0x030c0000u, "protocol_error"},
	[DECL_UNSUPPORTED] = {0x03060000u, "unsupported_option"},
	[DECL_INTERNAL] = {0x09990000u, "internal"},
	/* SMC has no code for an administrator's choice: one in its configuration
	 * class (0x03) that it leaves unused. */
	[DECL_POLICY] = {0x03100000u, "policy"},
	/* Nor for a client's own choice, which never goes on the wire. */
	[DECL_SHORT_LIVED] = {0x03110000u, "short_lived"},
};

uint32_t decline_code(enum decline d)
{
	return d < DECL_MAX ? table[d].code : table[DECL_INTERNAL].code;
}

const char *decline_name(enum decline d)
{
	return d < DECL_MAX ? table[d].name : "unknown";
}

enum decline decline_from_code(uint32_t code)
{
	for (int d = 0; d < DECL_MAX; d++)
		if (table[d].code == code && d != DECL_NO_PROPOSAL)
			return (enum decline)d;
	return DECL_PEER_DECLINED;
}
