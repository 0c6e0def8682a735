// rpmaclient: a librpma 1.2 peer for the iwarp-go interop suite. As a client
// (the default) it replays, one connection per sequence, what the example
// clients of librpma 1.2 do against a server that describes its memory in
// the 28-byte struct common_data of the examples' private data:
//
//   write-read   (04) 1 KiB RDMA Write at data_offset, then an 8-byte Read
//                of region offset 0 as the flushing primitive
//   write-flush  (05) 1 KiB Write at data_offset, then rpma_flush of it, the
//                flush type taken from the server's peer configuration
//   log          (07) read the u64 "used" at data_offset, write each word at
//                used, flush it, store the new used with rpma_atomic_write
//                (an 8-byte fenced Write) and flush that
//   gpspm        (09) 1 KiB Write at data_offset, then a GPSPM flush request
//                (protobuf, 27 bytes) as a Send, and the 9-byte answer
//
// As a server (-s) it is a librpma server in the examples' manner, serving a
// DRAM region, so that the client can be checked against librpma itself.
// Output is one KEY k=v line per event (README.md); diagnostics go to stderr.
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librpma.h>

#define DATA_LEN 1024              /* HELLO_STR_SIZE and the log's word buffer */
#define RAW_LEN 8                  /* 04's read-after-write buffer */
#define MSG_SIZE 512               /* 09's MSG_SIZE_MAX */
#define GPSPM_REQ_LEN 27
#define GPSPM_RESP_LEN 9
#define OP_CONTEXT 0xF01Du         /* 05/07/09's FLUSH_ID */
#define MR_DESC_SIZE 21
#define DESCRIPTORS_MAX 24
#define COMMON_DATA_LEN (4 + DESCRIPTORS_MAX)
#define MAX_WORDS 64
#define DEFAULT_PORT "7204" /* iwarp-peer sink's */

enum seq { SEQ_WRITE_READ, SEQ_WRITE_FLUSH, SEQ_LOG, SEQ_GPSPM, NSEQ };
static const char *seq_names[NSEQ] = { "write-read", "write-flush", "log", "gpspm" };

enum status {
	ST_OK, ST_CONNECT, ST_PRIVATE_DATA, ST_TOO_SMALL, ST_NOSUPP, ST_OPERR, ST_PROTOCOL,
	ST_TIMEOUT, ST_LOG_FULL, NSTATUS
};
static const char *status_names[NSTATUS] = {
	"ok", "connect", "private_data", "too_small", "nosupp", "op_error", "protocol",
	"timeout", "log_full",
};

enum flush_mode { FLUSH_AUTO, FLUSH_PERSISTENT, FLUSH_VISIBILITY };

struct opts {
	bool server;
	const char *addr, *port;
	int seqs[16], nseqs;
	uint8_t data[DATA_LEN];
	const char *words[MAX_WORDS];
	int nwords;
	enum flush_mode flush;
	int timeout_ms;
	bool verbose;
	/* server */
	int conns;
	size_t region;
	unsigned data_offset;
	bool direct_pmem;
};

// The examples' private data, decoded.
struct common {
	unsigned data_offset, mr_desc_size, pcfg_desc_size;
	uint64_t addr, length;
	uint32_t rkey;
	unsigned usage;
	int direct_write_to_pmem; /* -1: no peer-config descriptor */
};

static const char *prog = "rpmaclient";

static void errf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void outf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	va_end(ap);
}

// librpma's own messages, to stderr (the default also writes to syslog, which
// the guest does not have).
static void log_fn(enum rpma_log_level level, const char *file, const int line, const char *func,
		const char *fmt, ...)
{
	static const char *names[] = { "fatal", "error", "warning", "notice", "info", "debug" };
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "librpma %s: %s:%d %s: ", level >= 0 && level <= 5 ? names[level] : "?",
		file ? file : "", line, func ? func : "");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *hex(const void *p, size_t n, char *out, size_t cap)
{
	const uint8_t *b = p;
	size_t i;
	if (n == 0 || cap < 2)
		return "-";
	for (i = 0; i < n && 2 * i + 2 < cap; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * i] = 0;
	return out;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static const char *err_name(int ret) { return ret ? rpma_err_2str(ret) : "-"; }

// Waits up to timeout_ms for fd to become readable: 1 readable, 0 timeout.
static int wait_fd(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t end = now_ms() + timeout_ms;
	for (;;) {
		int left = (int)(end - now_ms());
		if (left < 0)
			left = 0;
		int n = poll(&p, 1, left);
		if (n > 0)
			return 1;
		if (n == 0)
			return 0;
		if (errno != EINTR)
			return 0;
	}
}

// Gets the next completion of cq within timeout_ms. rpma_cq_wait would block
// for ever, so the completion channel is polled first.
static int next_wc(struct rpma_cq *cq, struct ibv_wc *wc, int timeout_ms, enum status *st)
{
	int fd, ret;
	int64_t end = now_ms() + timeout_ms;
	if ((ret = rpma_cq_get_fd(cq, &fd))) {
		*st = ST_OPERR;
		return ret;
	}
	for (;;) {
		ret = rpma_cq_get_wc(cq, 1, wc, NULL);
		if (ret == 0)
			return 0;
		if (ret != RPMA_E_NO_COMPLETION) {
			*st = ST_OPERR;
			return ret;
		}
		int left = (int)(end - now_ms());
		if (left <= 0 || !wait_fd(fd, left)) {
			*st = ST_TIMEOUT;
			return -1;
		}
		ret = rpma_cq_wait(cq);
		if (ret && ret != RPMA_E_NO_COMPLETION) {
			*st = ST_OPERR;
			return ret;
		}
	}
}

// Checks a completion: success, the expected opcode and (if want_id) wr_id.
static enum status check_wc(const char *seq, const char *what, const struct ibv_wc *wc,
		enum ibv_wc_opcode op, bool want_id)
{
	if (wc->status != IBV_WC_SUCCESS) {
		errf("%s: %s completed with %s (vendor error %u)", seq, what,
			ibv_wc_status_str(wc->status), wc->vendor_err);
		return ST_OPERR;
	}
	if (wc->opcode != op) {
		errf("%s: %s completion has opcode %d, want %d", seq, what, wc->opcode, op);
		return ST_PROTOCOL;
	}
	if (want_id && wc->wr_id != OP_CONTEXT) {
		errf("%s: %s completion has wr_id 0x%" PRIx64 ", want 0x%x", seq, what,
			(uint64_t)wc->wr_id, OP_CONTEXT);
		return ST_PROTOCOL;
	}
	return ST_OK;
}

static int next_conn_event(struct rpma_conn *conn, int timeout_ms, enum rpma_conn_event *ev)
{
	int fd, ret;
	if ((ret = rpma_conn_get_event_fd(conn, &fd)))
		return ret;
	if (!wait_fd(fd, timeout_ms))
		return RPMA_E_NO_EVENT;
	return rpma_conn_next_event(conn, ev);
}

// Disconnects and waits (bounded) for the close, as the examples' clients do.
static void disconnect(struct rpma_conn **conn, int timeout_ms, const char *seq)
{
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	if (*conn == NULL)
		return;
	int ret = rpma_conn_disconnect(*conn);
	if (ret == 0)
		ret = next_conn_event(*conn, timeout_ms, &ev);
	outf("DISCONNECTED seq=%s event=%s ret=%d", seq, ret ? "-" : rpma_utils_conn_event_2str(ev), ret);
	rpma_conn_delete(conn);
}

// Decodes the examples' struct common_data as their clients read it.
static enum status parse_common(const struct rpma_conn_private_data *pd, struct common *c)
{
	const uint8_t *b = pd->ptr;
	memset(c, 0, sizeof(*c));
	c->direct_write_to_pmem = -1;
	if (pd->ptr == NULL || pd->len < COMMON_DATA_LEN) {
		errf("private data of %u bytes; struct common_data has %d", pd->len, COMMON_DATA_LEN);
		return ST_PRIVATE_DATA;
	}
	c->data_offset = (unsigned)b[0] | (unsigned)b[1] << 8;
	c->mr_desc_size = b[2];
	c->pcfg_desc_size = b[3];
	if (c->mr_desc_size < MR_DESC_SIZE || c->mr_desc_size + c->pcfg_desc_size > DESCRIPTORS_MAX) {
		errf("descriptor sizes %u + %u do not fit descriptors[%d]", c->mr_desc_size,
			c->pcfg_desc_size, DESCRIPTORS_MAX);
		return ST_PRIVATE_DATA;
	}
	const uint8_t *d = b + 4;
	c->addr = get_le64(d);
	c->length = get_le64(d + 8);
	c->rkey = (uint32_t)d[16] | (uint32_t)d[17] << 8 | (uint32_t)d[18] << 16 | (uint32_t)d[19] << 24;
	c->usage = d[20];
	if (c->pcfg_desc_size > 0)
		c->direct_write_to_pmem = d[c->mr_desc_size] != 0;
	return ST_OK;
}

// One client connection.
struct client {
	const struct opts *o;
	const char *seq;
	struct rpma_peer *peer;
	struct rpma_conn *conn;
	struct rpma_cq *cq, *rcq;
	struct rpma_mr_remote *dst;
	struct rpma_mr_local *src_mr, *aux_mr;
	uint8_t *src, *aux;
	struct common cd;
	size_t dst_size;
};

static void client_free(struct client *c)
{
	rpma_mr_remote_delete(&c->dst);
	rpma_mr_dereg(&c->src_mr);
	rpma_mr_dereg(&c->aux_mr);
	disconnect(&c->conn, c->o->timeout_ms, c->seq);
	rpma_peer_delete(&c->peer);
	free(c->src);
	free(c->aux);
}

static void *alloc_aligned(size_t n)
{
	void *p = NULL;
	long page = sysconf(_SC_PAGESIZE);
	if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, n))
		return NULL;
	memset(p, 0, n);
	return p;
}

// Connects, registers the local buffers and reads the server's descriptor.
static enum status client_setup(struct client *c, int rcq_size, int src_usage, int aux_usage)
{
	const struct opts *o = c->o;
	struct ibv_context *ctx = NULL;
	struct rpma_conn_cfg *cfg = NULL;
	struct rpma_conn_req *req = NULL;
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	int ret;

	if ((ret = rpma_utils_get_ibv_context(o->addr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx)) ||
			(ret = rpma_peer_new(ctx, &c->peer))) {
		errf("%s: no RDMA device reaches %s: %s", c->seq, o->addr, rpma_err_2str(ret));
		return ST_CONNECT;
	}
	if ((ret = rpma_conn_cfg_new(&cfg)) || (ret = rpma_conn_cfg_set_timeout(cfg, o->timeout_ms)) ||
			(rcq_size && (ret = rpma_conn_cfg_set_rcq_size(cfg, rcq_size)))) {
		rpma_conn_cfg_delete(&cfg);
		errf("%s: connection configuration: %s", c->seq, rpma_err_2str(ret));
		return ST_CONNECT;
	}
	ret = rpma_conn_req_new(c->peer, o->addr, o->port, cfg, &req);
	rpma_conn_cfg_delete(&cfg);
	if (ret == 0)
		ret = rpma_conn_req_connect(&req, NULL, &c->conn);
	if (ret == 0)
		ret = next_conn_event(c->conn, o->timeout_ms, &ev);
	if (ret || ev != RPMA_CONN_ESTABLISHED) {
		errf("%s: connecting to %s:%s: %s, event %s", c->seq, o->addr, o->port, err_name(ret),
			rpma_utils_conn_event_2str(ev));
		outf("CONNECT seq=%s status=%s event=%s", c->seq, ret ? "error" : "failed",
			rpma_utils_conn_event_2str(ev));
		rpma_conn_delete(&c->conn);
		return ST_CONNECT;
	}
	rpma_conn_get_cq(c->conn, &c->cq);
	if (rcq_size)
		rpma_conn_get_rcq(c->conn, &c->rcq);

	c->src = alloc_aligned(DATA_LEN);
	c->aux = alloc_aligned(DATA_LEN);
	if (c->src == NULL || c->aux == NULL)
		return ST_OPERR;
	if ((ret = rpma_mr_reg(c->peer, c->src, DATA_LEN, src_usage, &c->src_mr)) ||
			(aux_usage && (ret = rpma_mr_reg(c->peer, c->aux, DATA_LEN, aux_usage, &c->aux_mr)))) {
		errf("%s: rpma_mr_reg: %s", c->seq, rpma_err_2str(ret));
		return ST_OPERR;
	}

	struct rpma_conn_private_data pd = { 0 };
	char h[2 * 64 + 1];
	rpma_conn_get_private_data(c->conn, &pd);
	outf("ESTABLISHED seq=%s private_data_len=%u private_data=%s", c->seq, pd.len,
		hex(pd.ptr, pd.len < 64 ? pd.len : 64, h, sizeof(h)));
	enum status st = parse_common(&pd, &c->cd);
	if (st != ST_OK)
		return st;
	char dw[8] = "-";
	if (c->cd.direct_write_to_pmem >= 0)
		snprintf(dw, sizeof(dw), "%d", c->cd.direct_write_to_pmem);
	outf("DESCRIPTOR seq=%s data_offset=%u mr_desc_size=%u pcfg_desc_size=%u addr=0x%" PRIx64
		" length=%" PRIu64 " rkey=0x%08x usage=0x%02x direct_write_to_pmem=%s", c->seq,
		c->cd.data_offset, c->cd.mr_desc_size, c->cd.pcfg_desc_size, c->cd.addr, c->cd.length,
		c->cd.rkey, c->cd.usage, dw);
	const uint8_t *desc = (const uint8_t *)pd.ptr + 4;
	if ((ret = rpma_mr_remote_from_descriptor(desc, c->cd.mr_desc_size, &c->dst)) ||
			(ret = rpma_mr_remote_get_size(c->dst, &c->dst_size))) {
		errf("%s: rpma_mr_remote_from_descriptor: %s", c->seq, rpma_err_2str(ret));
		return ST_PRIVATE_DATA;
	}
	return ST_OK;
}

// The 1 KiB Write at data_offset of 04, 05 and 09 (unsignalled, as there).
static enum status write_data(struct client *c)
{
	if (c->dst_size < c->cd.data_offset || c->dst_size - c->cd.data_offset < DATA_LEN) {
		errf("%s: region of %zu bytes has no %d bytes at data_offset %u", c->seq, c->dst_size,
			DATA_LEN, c->cd.data_offset);
		return ST_TOO_SMALL;
	}
	memcpy(c->src, c->o->data, DATA_LEN);
	int ret = rpma_write(c->conn, c->dst, c->cd.data_offset, c->src_mr, 0, DATA_LEN,
		RPMA_F_COMPLETION_ON_ERROR, NULL);
	outf("WRITE seq=%s offset=%u len=%d ret=%d error=%s", c->seq, c->cd.data_offset, DATA_LEN, ret,
		err_name(ret));
	return ret ? ST_OPERR : ST_OK;
}

// Posts rpma_flush and reports what it returned. A flush that is posted and
// signalled is then waited for by the caller.
static enum status post_flush(struct client *c, size_t off, size_t len, enum rpma_flush_type type,
		int flags)
{
	int ret = rpma_flush(c->conn, c->dst, off, len, type, flags, (void *)(uintptr_t)OP_CONTEXT);
	outf("FLUSH seq=%s offset=%zu len=%zu type=%s ret=%d error=%s", c->seq, off, len,
		type == RPMA_FLUSH_TYPE_PERSISTENT ? "persistent" : "visibility", ret, err_name(ret));
	if (ret == RPMA_E_NOSUPP)
		return ST_NOSUPP;
	return ret ? ST_OPERR : ST_OK;
}

static enum status wait_flush(struct client *c, size_t off, size_t len)
{
	struct ibv_wc wc;
	enum status st = ST_OK;
	if (next_wc(c->cq, &wc, c->o->timeout_ms, &st)) {
		outf("FLUSHED seq=%s offset=%zu len=%zu status=%s", c->seq, off, len, status_names[st]);
		return st;
	}
	st = check_wc(c->seq, "flush", &wc, IBV_WC_RDMA_READ, true);
	outf("FLUSHED seq=%s offset=%zu len=%zu status=%s wc=%s", c->seq, off, len, status_names[st],
		ibv_wc_status_str(wc.status));
	return st;
}

static enum rpma_flush_type flush_type(const struct client *c, bool persistent)
{
	switch (c->o->flush) {
	case FLUSH_PERSISTENT:
		return RPMA_FLUSH_TYPE_PERSISTENT;
	case FLUSH_VISIBILITY:
		return RPMA_FLUSH_TYPE_VISIBILITY;
	default:
		return persistent ? RPMA_FLUSH_TYPE_PERSISTENT : RPMA_FLUSH_TYPE_VISIBILITY;
	}
}

// 04-write-to-persistent.
static enum status seq_write_read(struct client *c)
{
	enum status st = client_setup(c, 0, RPMA_MR_USAGE_WRITE_SRC, RPMA_MR_USAGE_READ_DST);
	if (st != ST_OK || (st = write_data(c)) != ST_OK)
		return st;
	int ret = rpma_read(c->conn, c->aux_mr, 0, c->dst, 0, RAW_LEN, RPMA_F_COMPLETION_ALWAYS, NULL);
	if (ret) {
		outf("READ seq=%s offset=0 len=%d ret=%d error=%s status=op_error", c->seq, RAW_LEN, ret,
			err_name(ret));
		return ST_OPERR;
	}
	struct ibv_wc wc;
	char h[2 * RAW_LEN + 1];
	if (next_wc(c->cq, &wc, c->o->timeout_ms, &st) == 0)
		st = check_wc(c->seq, "read", &wc, IBV_WC_RDMA_READ, false);
	outf("READ seq=%s offset=0 len=%d ret=0 error=- status=%s data=%s", c->seq, RAW_LEN,
		status_names[st], st == ST_OK ? hex(c->aux, RAW_LEN, h, sizeof(h)) : "-");
	return st;
}

// Applies the server's peer configuration as 05 does: it decides whether
// RPMA_FLUSH_TYPE_PERSISTENT is allowed on this connection.
static enum status apply_server_cfg(struct client *c, bool *direct)
{
	struct rpma_peer_cfg *pcfg = NULL;
	struct rpma_conn_private_data pd = { 0 };
	int ret;
	rpma_conn_get_private_data(c->conn, &pd);
	ret = rpma_peer_cfg_from_descriptor((const uint8_t *)pd.ptr + 4 + c->cd.mr_desc_size,
		c->cd.pcfg_desc_size, &pcfg);
	if (ret == 0)
		ret = rpma_peer_cfg_get_direct_write_to_pmem(pcfg, direct);
	if (ret == 0)
		ret = rpma_conn_apply_remote_peer_cfg(c->conn, pcfg);
	rpma_peer_cfg_delete(&pcfg);
	if (ret) {
		errf("%s: the server's peer configuration: %s", c->seq, rpma_err_2str(ret));
		return ST_PRIVATE_DATA;
	}
	return ST_OK;
}

// 05-flush-to-persistent.
static enum status seq_write_flush(struct client *c)
{
	bool direct = false;
	enum status st = client_setup(c, 0, RPMA_MR_USAGE_WRITE_SRC, 0);
	if (st != ST_OK || (st = apply_server_cfg(c, &direct)) != ST_OK || (st = write_data(c)) != ST_OK)
		return st;
	st = post_flush(c, c->cd.data_offset, DATA_LEN, flush_type(c, direct), RPMA_F_COMPLETION_ALWAYS);
	if (st != ST_OK)
		return st;
	return wait_flush(c, c->cd.data_offset, DATA_LEN);
}

// 07-atomic-write: a remote log whose u64 "used" lies at data_offset.
static enum status seq_log(struct client *c)
{
	struct rpma_peer_cfg *pcfg = NULL;
	int ret;
	enum status st = client_setup(c, 0, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, 0);
	if (st != ST_OK)
		return st;
	// 07 declares the server's direct write to pmem itself, unilaterally,
	// and then picks the flush type by the descriptor's usage bits.
	if ((ret = rpma_peer_cfg_new(&pcfg)) || (ret = rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true)) ||
			(ret = rpma_conn_apply_remote_peer_cfg(c->conn, pcfg))) {
		rpma_peer_cfg_delete(&pcfg);
		errf("%s: peer configuration: %s", c->seq, rpma_err_2str(ret));
		return ST_OPERR;
	}
	rpma_peer_cfg_delete(&pcfg);
	size_t used_off = c->cd.data_offset;
	if (c->dst_size < used_off + 8)
		return ST_TOO_SMALL;
	ret = rpma_read(c->conn, c->src_mr, 0, c->dst, used_off, 8, RPMA_F_COMPLETION_ALWAYS, NULL);
	struct ibv_wc wc;
	if (ret || next_wc(c->cq, &wc, c->o->timeout_ms, &st) ||
			(st = check_wc(c->seq, "read of used", &wc, IBV_WC_RDMA_READ, false)) != ST_OK) {
		outf("USED seq=%s offset=%zu status=%s", c->seq, used_off, ret ? "op_error" : status_names[st]);
		return ret ? ST_OPERR : st;
	}
	uint64_t used = get_le64(c->src);
	outf("USED seq=%s offset=%zu value=%" PRIu64 " status=ok", c->seq, used_off, used);
	if (c->dst_size <= used) {
		errf("%s: log full: used %" PRIu64 " of %zu", c->seq, used, c->dst_size);
		return ST_LOG_FULL;
	}
	int remote_flush = 0;
	rpma_mr_remote_get_flush_type(c->dst, &remote_flush);
	enum rpma_flush_type type = flush_type(c, remote_flush & RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
	for (int i = 0; i < c->o->nwords; i++) {
		size_t n = strnlen(c->o->words[i], DATA_LEN - 1) + 1;
		if (used + n > c->dst_size) {
			errf("%s: log full: word %d (%zu bytes) at %" PRIu64, c->seq, i, n, used);
			return ST_LOG_FULL;
		}
		memset(c->src, 0, DATA_LEN);
		memcpy(c->src, c->o->words[i], n - 1);
		ret = rpma_write(c->conn, c->dst, used, c->src_mr, 0, n, RPMA_F_COMPLETION_ON_ERROR, NULL);
		outf("APPEND seq=%s word=%d offset=%" PRIu64 " len=%zu ret=%d error=%s", c->seq, i, used, n,
			ret, err_name(ret));
		if (ret)
			return ST_OPERR;
		if ((st = post_flush(c, used, n, type, RPMA_F_COMPLETION_ON_ERROR)) != ST_OK)
			return st;
		used += n;
		// rpma_atomic_write copies the 8 bytes into the work request
		// (inline), so the buffer is free again at once.
		uint8_t word[8];
		put_le64(word, used);
		ret = rpma_atomic_write(c->conn, c->dst, used_off, (const char *)word,
			RPMA_F_COMPLETION_ON_ERROR, NULL);
		outf("ATOMIC seq=%s offset=%zu value=%" PRIu64 " ret=%d error=%s", c->seq, used_off, used, ret,
			err_name(ret));
		if (ret)
			return ST_OPERR;
		if ((st = post_flush(c, used_off, 8, type, RPMA_F_COMPLETION_ALWAYS)) != ST_OK)
			return st;
		if ((st = wait_flush(c, used_off, 8)) != ST_OK)
			return st;
	}
	return ST_OK;
}

// 09-flush-to-persistent-GPSPM: the GPSPM_flush_request of
// GPSPM_flush.proto (proto2, three required fixed64 fields) packed by hand:
// tag, 8 bytes little-endian, for fields 1, 2 and 3.
static size_t gpspm_request(uint8_t *b, uint64_t off, uint64_t len, uint64_t ctx)
{
	b[0] = 0x09, put_le64(b + 1, off);
	b[9] = 0x11, put_le64(b + 10, len);
	b[18] = 0x19, put_le64(b + 19, ctx);
	return GPSPM_REQ_LEN;
}

// Decodes a GPSPM_flush_response as protobuf-c would: fields in any order,
// unknown fields skipped, the required op_context (1, fixed64) present.
static int gpspm_response(const uint8_t *b, size_t n, uint64_t *ctx)
{
	int have = 0;
	size_t i = 0;
	while (i < n) {
		uint64_t key = 0;
		int shift = 0;
		do {
			if (i >= n || shift > 63)
				return -1;
			key |= (uint64_t)(b[i] & 0x7f) << shift;
			shift += 7;
		} while (b[i++] & 0x80);
		unsigned wt = key & 7;
		uint64_t field = key >> 3, l = 0;
		switch (wt) {
		case 0:
			do {
				if (i >= n)
					return -1;
			} while (b[i++] & 0x80);
			break;
		case 1:
			if (n - i < 8)
				return -1;
			if (field == 1) {
				*ctx = get_le64(b + i);
				have = 1;
			}
			i += 8;
			break;
		case 2:
			shift = 0;
			do {
				if (i >= n || shift > 63)
					return -1;
				l |= (uint64_t)(b[i] & 0x7f) << shift;
				shift += 7;
			} while (b[i++] & 0x80);
			if (l > n - i)
				return -1;
			i += l;
			break;
		case 5:
			if (n - i < 4)
				return -1;
			i += 4;
			break;
		default:
			return -1;
		}
		if (field == 1 && wt != 1)
			return -1;
	}
	return have ? 0 : -1;
}

static enum status seq_gpspm(struct client *c)
{
	enum status st = client_setup(c, 1, RPMA_MR_USAGE_WRITE_SRC, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV);
	if (st != ST_OK || (st = write_data(c)) != ST_OK)
		return st;
	uint8_t *sendb = c->aux, *recvb = c->aux + MSG_SIZE;
	int ret = rpma_recv(c->conn, c->aux_mr, MSG_SIZE, MSG_SIZE, NULL);
	if (ret) {
		errf("%s: rpma_recv: %s", c->seq, rpma_err_2str(ret));
		return ST_OPERR;
	}
	size_t n = gpspm_request(sendb, c->cd.data_offset, DATA_LEN, OP_CONTEXT);
	ret = rpma_send(c->conn, c->aux_mr, 0, n, RPMA_F_COMPLETION_ALWAYS, NULL);
	if (ret) {
		errf("%s: rpma_send: %s", c->seq, rpma_err_2str(ret));
		return ST_OPERR;
	}
	struct ibv_wc wc = { 0 };
	if (next_wc(c->cq, &wc, c->o->timeout_ms, &st) ||
			(st = check_wc(c->seq, "send", &wc, IBV_WC_SEND, false)) != ST_OK) {
		outf("GPSPM seq=%s offset=%u length=%d op_context=0x%x request_len=%zu status=%s", c->seq,
			c->cd.data_offset, DATA_LEN, OP_CONTEXT, n, status_names[st]);
		return st;
	}
	uint64_t ctx = 0;
	char h[2 * 32 + 1];
	if (next_wc(c->rcq, &wc, c->o->timeout_ms, &st) == 0 &&
			(st = check_wc(c->seq, "receive", &wc, IBV_WC_RECV, false)) == ST_OK) {
		if (gpspm_response(recvb, wc.byte_len, &ctx) || ctx != OP_CONTEXT) {
			errf("%s: the response (%u bytes) is no GPSPM_flush_response for op_context 0x%x",
				c->seq, wc.byte_len, OP_CONTEXT);
			st = ST_PROTOCOL;
		}
	}
	outf("GPSPM seq=%s offset=%u length=%d op_context=0x%x request_len=%zu response_len=%u "
		"response=%s response_op_context=0x%" PRIx64 " status=%s", c->seq, c->cd.data_offset,
		DATA_LEN, OP_CONTEXT, n, st == ST_TIMEOUT ? 0 : wc.byte_len,
		st == ST_TIMEOUT ? "-" : hex(recvb, wc.byte_len < 32 ? wc.byte_len : 32, h, sizeof(h)),
		ctx, status_names[st]);
	return st;
}

static int run_client(const struct opts *o)
{
	int ok = 0, failed = 0;
	for (int i = 0; i < o->nseqs; i++) {
		struct client c = { .o = o, .seq = seq_names[o->seqs[i]] };
		enum status st;
		switch (o->seqs[i]) {
		case SEQ_WRITE_READ: st = seq_write_read(&c); break;
		case SEQ_WRITE_FLUSH: st = seq_write_flush(&c); break;
		case SEQ_LOG: st = seq_log(&c); break;
		default: st = seq_gpspm(&c); break;
		}
		client_free(&c);
		outf("RESULT seq=%s status=%s", c.seq, status_names[st]);
		if (st == ST_OK)
			ok++;
		else
			failed++;
	}
	outf("SUMMARY role=client ok=%d failed=%d", ok, failed);
	return failed ? 1 : 0;
}

// --- server ---------------------------------------------------------------

// Serves one connection: posts a receive for a GPSPM request before it
// accepts (09's server), answers requests until the client disconnects.
static int serve_one(const struct opts *o, int n, struct rpma_ep *ep, struct rpma_mr_local *msg_mr,
		uint8_t *msg, struct rpma_conn_private_data *pd, const uint8_t *region)
{
	struct rpma_conn_cfg *cfg = NULL;
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	struct rpma_cq *cq = NULL, *rcq = NULL;
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	int ret, epfd, requests = 0, rc = 1;

	if ((ret = rpma_conn_cfg_new(&cfg)) || (ret = rpma_conn_cfg_set_rcq_size(cfg, 1)) ||
			(ret = rpma_ep_get_fd(ep, &epfd))) {
		errf("server: %s", rpma_err_2str(ret));
		goto out;
	}
	if (!wait_fd(epfd, 120000)) {
		errf("server: no connection request within 120 s");
		goto out;
	}
	if ((ret = rpma_ep_next_conn_req(ep, cfg, &req)) ||
			(ret = rpma_conn_req_recv(req, msg_mr, MSG_SIZE, MSG_SIZE, NULL)) ||
			(ret = rpma_conn_req_connect(&req, pd, &conn)) ||
			(ret = next_conn_event(conn, o->timeout_ms, &ev)) || ev != RPMA_CONN_ESTABLISHED) {
		errf("server: accepting: %s, event %s", err_name(ret), rpma_utils_conn_event_2str(ev));
		rpma_conn_req_delete(&req);
		goto out;
	}
	outf("ESTABLISHED role=server conn=%d", n);
	rpma_conn_get_cq(conn, &cq);
	rpma_conn_get_rcq(conn, &rcq);
	int evfd, rfd;
	rpma_conn_get_event_fd(conn, &evfd);
	rpma_cq_get_fd(rcq, &rfd);
	bool closing = false;
	for (;;) {
		struct pollfd p[2] = { { .fd = evfd, .events = POLLIN }, { .fd = rfd, .events = POLLIN } };
		struct ibv_wc wc;
		enum status st = ST_OK;
		if (poll(p, closing ? 1 : 2, 120000) <= 0) {
			errf("server: connection %d idle for 120 s", n);
			goto out;
		}
		if (!closing && p[1].revents) {
			if (next_wc(rcq, &wc, o->timeout_ms, &st))
				goto out;
			if (wc.status == IBV_WC_WR_FLUSH_ERR) {
				// The client disconnected: the posted receive is
				// flushed; the close event follows.
				closing = true;
				continue;
			}
			if (check_wc("server", "receive", &wc, IBV_WC_RECV, false) != ST_OK)
				goto out;
			const uint8_t *r = msg + MSG_SIZE;
			uint64_t off = 0, len = 0, ctx = 0;
			bool good = wc.byte_len == GPSPM_REQ_LEN && r[0] == 0x09 && r[9] == 0x11 && r[18] == 0x19;
			if (good) {
				off = get_le64(r + 1), len = get_le64(r + 10), ctx = get_le64(r + 19);
			}
			outf("GPSPM_REQUEST role=server conn=%d len=%u offset=%" PRIu64 " length=%" PRIu64
				" op_context=0x%" PRIx64 " status=%s", n, wc.byte_len, off, len, ctx,
				good ? "ok" : "protocol");
			if (!good)
				goto out;
			// DRAM: there is nothing to persist; 09's server does the
			// same without pmem.
			requests++;
			msg[0] = 0x09;
			put_le64(msg + 1, ctx);
			if ((ret = rpma_recv(conn, msg_mr, MSG_SIZE, MSG_SIZE, NULL)) ||
					(ret = rpma_send(conn, msg_mr, 0, GPSPM_RESP_LEN, RPMA_F_COMPLETION_ALWAYS, NULL)) ||
					next_wc(cq, &wc, o->timeout_ms, &st) ||
					check_wc("server", "send", &wc, IBV_WC_SEND, false) != ST_OK) {
				errf("server: answering the flush request: %s", err_name(ret));
				goto out;
			}
			continue;
		}
		if (p[0].revents) {
			if ((ret = rpma_conn_next_event(conn, &ev)))
				goto out;
			if (ev == RPMA_CONN_CLOSED || ev == RPMA_CONN_LOST)
				break;
		}
	}
	rc = 0;
out:
	if (conn) {
		rpma_conn_disconnect(conn);
		rpma_conn_delete(&conn);
	}
	rpma_conn_cfg_delete(&cfg);
	// The region after the connection, from data_offset: the client's
	// 1 KiB, or used and the log entries behind it.
	size_t show = o->region - o->data_offset < 2 * DATA_LEN ? o->region - o->data_offset : 2 * DATA_LEN;
	char *h = malloc(2 * show + 1);
	char head[2 * 8 + 1];
	if (h) {
		outf("REGION role=server conn=%d requests=%d status=%s head=%s offset=%u len=%zu data=%s", n,
			requests, rc ? "error" : "ok", hex(region, 8, head, sizeof(head)), o->data_offset, show,
			hex(region + o->data_offset, show, h, 2 * show + 1));
		free(h);
	}
	return rc;
}

static int run_server(const struct opts *o)
{
	struct ibv_context *ctx = NULL;
	struct rpma_peer *peer = NULL;
	struct rpma_ep *ep = NULL;
	struct rpma_mr_local *mr = NULL, *msg_mr = NULL;
	struct rpma_peer_cfg *pcfg = NULL;
	uint8_t *region = alloc_aligned(o->region), *msg = alloc_aligned(2 * MSG_SIZE);
	int ret, failed = 0;
	if (region == NULL || msg == NULL)
		return 1;
	// 07's server: the examples' signature at the start (04's client reads
	// its first 8 bytes back), "used" at data_offset, starting right
	// behind itself.
	static const char sig[] = "RPMA_EXAMPLE_SIG";
	memcpy(region, sig, o->data_offset < sizeof(sig) ? o->data_offset : sizeof(sig));
	put_le64(region + o->data_offset, o->data_offset + 8);
	int usage = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
	if (o->direct_pmem)
		usage |= RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
	if ((ret = rpma_utils_get_ibv_context(o->addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx)) ||
			(ret = rpma_peer_new(ctx, &peer)) ||
			(ret = rpma_ep_listen(peer, o->addr, o->port, &ep)) ||
			(ret = rpma_mr_reg(peer, region, o->region, usage, &mr)) ||
			(ret = rpma_mr_reg(peer, msg, 2 * MSG_SIZE, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &msg_mr)) ||
			(ret = rpma_peer_cfg_new(&pcfg)) ||
			(ret = rpma_peer_cfg_set_direct_write_to_pmem(pcfg, o->direct_pmem))) {
		errf("server: setting up on %s:%s: %s", o->addr, o->port, rpma_err_2str(ret));
		return 1;
	}
	uint8_t cd[COMMON_DATA_LEN] = { 0 };
	size_t mrs = 0, pcs = 0;
	rpma_mr_get_descriptor_size(mr, &mrs);
	rpma_peer_cfg_get_descriptor_size(pcfg, &pcs);
	if (mrs + pcs > DESCRIPTORS_MAX) {
		errf("server: descriptors of %zu + %zu bytes", mrs, pcs);
		return 1;
	}
	cd[0] = (uint8_t)o->data_offset, cd[1] = (uint8_t)(o->data_offset >> 8);
	cd[2] = (uint8_t)mrs, cd[3] = (uint8_t)pcs;
	rpma_mr_get_descriptor(mr, cd + 4);
	rpma_peer_cfg_get_descriptor(pcfg, cd + 4 + mrs);
	struct rpma_conn_private_data pd = { .ptr = cd, .len = sizeof(cd) };
	char h[2 * COMMON_DATA_LEN + 1];
	outf("LISTENING role=server addr=%s port=%s region=%zu data_offset=%u usage=0x%02x "
		"direct_write_to_pmem=%d private_data=%s", o->addr, o->port, o->region, o->data_offset, usage,
		o->direct_pmem, hex(cd, sizeof(cd), h, sizeof(h)));
	for (int n = 0; n < o->conns; n++)
		failed += serve_one(o, n, ep, msg_mr, msg, &pd, region);
	outf("SUMMARY role=server ok=%d failed=%d", o->conns - failed, failed);
	rpma_peer_cfg_delete(&pcfg);
	rpma_mr_dereg(&msg_mr);
	rpma_mr_dereg(&mr);
	rpma_ep_shutdown(&ep);
	rpma_peer_delete(&peer);
	free(region);
	free(msg);
	return failed ? 1 : 0;
}

// --- options ----------------------------------------------------------------

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s -a ADDR [-p PORT] [-o SEQ[,SEQ...]] [-d TEXT | -x HEX] [-w WORD]...\n"
		"                  [-f auto|persistent|visibility] [-t SECONDS] [-v]\n"
		"       %s -s -a ADDR [-p PORT] [-n CONNECTIONS] [--region BYTES]\n"
		"                  [--data-offset N] [--direct-pmem-write] [-t SECONDS] [-v]\n"
		"\n"
		"Client (default): one connection per sequence (default: all, in this order):\n"
		"  write-read   1 KiB Write at data_offset, 8-byte Read of offset 0 (librpma example 04)\n"
		"  write-flush  1 KiB Write at data_offset, rpma_flush of it (05)\n"
		"  log          read u64 used at data_offset; per word: Write at used, flush,\n"
		"               rpma_atomic_write of the new used, flush (07)\n"
		"  gpspm        1 KiB Write at data_offset, GPSPM flush request and answer (09)\n"
		"  -d TEXT      the 1 KiB written: TEXT, then zero bytes (default \"Hello world!\")\n"
		"  -x HEX       the same from hex digits\n"
		"  -w WORD      a log entry (repeatable; default one, \"rpmaclient\")\n"
		"  -f MODE      flush type: auto (as the examples choose), persistent, visibility\n"
		"Server (-s): a librpma server in DRAM; -n connections (default 1), each answered\n"
		"  with struct common_data; GPSPM requests answered; prints the region after each.\n"
		"  -t           every wait's limit (default 30 s); default port " DEFAULT_PORT ".\n",
		prog, prog);
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int parse_seqs(struct opts *o, char *s)
{
	o->nseqs = 0;
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		int k;
		if (strcmp(tok, "all") == 0) {
			for (k = 0; k < NSEQ && o->nseqs < 16; k++)
				o->seqs[o->nseqs++] = k;
			continue;
		}
		for (k = 0; k < NSEQ && strcmp(tok, seq_names[k]) != 0; k++)
			;
		if (k == NSEQ || o->nseqs == 16) {
			errf("unknown sequence %s (write-read, write-flush, log, gpspm, all)", tok);
			return -1;
		}
		o->seqs[o->nseqs++] = k;
	}
	return o->nseqs ? 0 : -1;
}

static int parse_opts(struct opts *o, int argc, char **argv)
{
	enum { O_REGION = 256, O_DATA_OFFSET, O_DIRECT };
	static const struct option lo[] = {
		{ "server", no_argument, NULL, 's' },
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "ops", required_argument, NULL, 'o' },
		{ "data", required_argument, NULL, 'd' },
		{ "data-hex", required_argument, NULL, 'x' },
		{ "word", required_argument, NULL, 'w' },
		{ "flush", required_argument, NULL, 'f' },
		{ "timeout", required_argument, NULL, 't' },
		{ "connections", required_argument, NULL, 'n' },
		{ "region", required_argument, NULL, O_REGION },
		{ "data-offset", required_argument, NULL, O_DATA_OFFSET },
		{ "direct-pmem-write", no_argument, NULL, O_DIRECT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char all[] = "all";
	const char *text = "Hello world!";
	const char *hexs = NULL;
	int ch;
	memset(o, 0, sizeof(*o));
	o->port = DEFAULT_PORT;
	o->timeout_ms = 30000;
	o->conns = 1;
	o->region = 4096;
	o->data_offset = 64;
	parse_seqs(o, all);
	while ((ch = getopt_long(argc, argv, "sa:p:o:d:x:w:f:t:n:vh", lo, NULL)) != -1) {
		switch (ch) {
		case 's': o->server = true; break;
		case 'a': o->addr = optarg; break;
		case 'p': o->port = optarg; break;
		case 'o':
			if (parse_seqs(o, optarg))
				return -1;
			break;
		case 'd': text = optarg, hexs = NULL; break;
		case 'x': hexs = optarg; break;
		case 'w':
			if (o->nwords == MAX_WORDS) {
				errf("at most %d words", MAX_WORDS);
				return -1;
			}
			o->words[o->nwords++] = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "auto") == 0)
				o->flush = FLUSH_AUTO;
			else if (strcmp(optarg, "persistent") == 0)
				o->flush = FLUSH_PERSISTENT;
			else if (strcmp(optarg, "visibility") == 0)
				o->flush = FLUSH_VISIBILITY;
			else {
				errf("-f %s: want auto, persistent or visibility", optarg);
				return -1;
			}
			break;
		case 't': o->timeout_ms = atoi(optarg) * 1000; break;
		case 'n': o->conns = atoi(optarg); break;
		case O_REGION: o->region = strtoul(optarg, NULL, 0); break;
		case O_DATA_OFFSET: o->data_offset = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_DIRECT: o->direct_pmem = true; break;
		case 'v': o->verbose = true; break;
		case 'h': usage(stdout); exit(0);
		default: return -1;
		}
	}
	if (optind != argc || o->addr == NULL) {
		errf(o->addr ? "unexpected argument %s" : "-a ADDR is required", argv[optind]);
		return -1;
	}
	if (o->timeout_ms <= 0 || o->conns <= 0) {
		errf("-t and -n take positive numbers");
		return -1;
	}
	if (o->data_offset % 8 || o->data_offset > 0xffff || o->region < o->data_offset + 2 * DATA_LEN) {
		errf("--data-offset must be 8-aligned with --region at least data_offset + %d", 2 * DATA_LEN);
		return -1;
	}
	if (hexs) {
		size_t n = strlen(hexs);
		if (n % 2 || n / 2 > DATA_LEN) {
			errf("-x: an even number of hex digits, at most %d bytes", DATA_LEN);
			return -1;
		}
		for (size_t i = 0; i < n / 2; i++) {
			int hi = hexval(hexs[2 * i]), lo2 = hexval(hexs[2 * i + 1]);
			if (hi < 0 || lo2 < 0) {
				errf("-x: not a hex digit in %s", hexs);
				return -1;
			}
			o->data[i] = (uint8_t)(hi << 4 | lo2);
		}
	} else {
		strncpy((char *)o->data, text, DATA_LEN - 1);
	}
	if (o->nwords == 0)
		o->words[o->nwords++] = "rpmaclient";
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse_opts(&o, argc, argv)) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rpma_log_set_function(log_fn);
	rpma_log_set_threshold(RPMA_LOG_THRESHOLD, o.verbose ? RPMA_LOG_LEVEL_INFO : RPMA_LOG_LEVEL_WARNING);
	return o.server ? run_server(&o) : run_client(&o);
}
