// iwtest: an RDMA test peer for the iwarp-go interop suite, written against
// libibverbs and librdmacm. It runs as server (-s) or client (-c) and speaks
// the control protocol defined in PROTOCOL.md, so that either side can be
// replaced by another implementation of that document.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CTRL_LEN 32
#define CTRL_MAGIC 0x49575431u /* "IWT1" */
#define MAX_SGE 6
#define SGE_GAP 16
#define GUARD 64
#define GUARD_BYTE 0xA5
#define INV_REGION 4096
#define MAX_SIZE (16u << 20)
#define MAX_PDATA 251 /* siw wraps its 8-bit length above this */

enum msg_type { T_HELLO = 1, T_BEGIN = 2, T_BUF = 3, T_GO = 4, T_DONE = 5, T_ACK = 6, T_BYE = 7 };
enum test_id { WRITE = 1, READ, SEND, SEND_SE, SEND_INV, SEND_SGE, WRITE_SGE, NTESTS };
enum status {
	ST_OK = 0, ST_MISMATCH, ST_OPERR, ST_PROTOCOL, ST_LENGTH, ST_INVALIDATE, ST_SOLICITED,
	ST_TIMEOUT, ST_TERMINATED, ST_NOT_TERMINATED, NSTATUS
};

static const char *test_names[NTESTS] = {
	"", "write", "read", "send", "send_se", "send_inv", "send_sge", "write_sge",
};
static const char *status_names[NSTATUS] = {
	"ok", "mismatch", "op_error", "protocol", "length", "invalidate", "solicited",
	"timeout", "terminated", "not_terminated",
};
static const char *msg_names[] = { "?", "HELLO", "BEGIN", "BUF", "GO", "DONE", "ACK", "BYE" };

struct msg {
	uint8_t type, test, dir, status;
	uint32_t iter, size;
	uint64_t addr;
	uint32_t stag, len;
};

struct phase {
	int test, dir;
	uint32_t iter, size;
};

// Where the pieces of one message lie in a local buffer: with one piece the
// message is contiguous at offset 0; with several, the pieces are stored in
// reverse order with gaps, so only a correct gather/scatter reassembles them.
struct layout {
	int k;
	size_t off[MAX_SGE], len[MAX_SGE], span;
};

struct opts {
	int server;
	const char *addr;
	int port;
	int tests[16], ntests;
	uint32_t sizes[64];
	int nsizes;
	int iters;
	int dirs; /* bit 0: c2s, bit 1: s2c */
	int timeout_ms, wait_ms;
	int ird, ord;
	const char *pdata;
	int reject, expect_reject, expect_error;
	int provoke; /* 0, 1 access, 2 bounds */
	int require_se_event, require_inv_report;
	int nsge;
	int verbose;
};

struct ctx {
	struct opts o;
	struct rdma_event_channel *ec;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *sch, *rch;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	uint8_t *csend, *crecv;
	struct ibv_mr *csend_mr, *crecv_mr;
	uint8_t *buf, *invmem;
	size_t buflen;
	struct ibv_mr *buf_mr, *noacc_mr;
	uint32_t maxsize;
	int nsge, rsge;
	uint64_t wr_seq;
	int dead;      /* the connection failed: no more posting */
	int terminated; /* a provoked failure was observed */
};

static const char *prog = "iwtest";

static void errf(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void outf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- pattern ---------------------------------------------------------- */

static uint32_t fmix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	x ^= x >> 16;
	return x;
}

static uint32_t phase_seed(const struct phase *ph)
{
	return fmix32(fmix32(fmix32((uint32_t)ph->test * 256u + (uint32_t)ph->dir) + ph->iter) + ph->size);
}

// Byte i of a message is byte (i mod 4) of fmix32(seed + i/4), little end first.
static void pattern_fill(uint8_t *dst, uint32_t seed, size_t from, size_t len, int invert)
{
	uint8_t x = invert ? 0xff : 0;
	for (size_t i = 0; i < len; i++) {
		size_t m = from + i;
		uint32_t w = fmix32(seed + (uint32_t)(m >> 2));
		dst[i] = (uint8_t)(w >> (8 * (m & 3))) ^ x;
	}
}

static size_t pattern_check(const uint8_t *src, uint32_t seed, size_t from, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		size_t m = from + i;
		uint32_t w = fmix32(seed + (uint32_t)(m >> 2));
		if (src[i] != (uint8_t)(w >> (8 * (m & 3))))
			return i;
	}
	return (size_t)-1;
}

static void make_layout(struct layout *l, uint32_t size, int k)
{
	if (k < 1)
		k = 1;
	if ((uint32_t)k > size)
		k = (int)size;
	l->k = k;
	size_t base = size / k, extra = size % k, loc = 0;
	for (int j = 0; j < k; j++)
		l->len[j] = base + ((size_t)j < extra ? 1 : 0);
	for (int j = k - 1; j >= 0; j--) {
		l->off[j] = loc;
		loc += l->len[j] + (k > 1 ? SGE_GAP : 0);
	}
	l->span = loc;
}

// Fills the pieces with the message pattern (invert: its complement) and the
// gaps and tail with GUARD_BYTE.
static void layout_fill(uint8_t *buf, const struct layout *l, uint32_t seed, int invert)
{
	memset(buf, GUARD_BYTE, l->span + GUARD);
	size_t mo = 0;
	for (int j = 0; j < l->k; j++) {
		pattern_fill(buf + l->off[j], seed, mo, l->len[j], invert);
		mo += l->len[j];
	}
}

static int layout_check(const uint8_t *buf, const struct layout *l, uint32_t seed, int verbose)
{
	size_t mo = 0;
	for (int j = 0; j < l->k; j++) {
		size_t bad = pattern_check(buf + l->off[j], seed, mo, l->len[j]);
		if (bad != (size_t)-1) {
			if (verbose)
				errf("data mismatch at message offset %zu", mo + bad);
			return ST_MISMATCH;
		}
		mo += l->len[j];
	}
	// Everything outside the pieces must still hold the guard byte.
	for (int j = 0; j < l->k; j++) {
		size_t end = l->off[j] + l->len[j];
		size_t next = j == 0 ? l->span + GUARD : l->off[j - 1];
		for (size_t i = end; i < next; i++)
			if (buf[i] != GUARD_BYTE) {
				if (verbose)
					errf("write outside the message at buffer offset %zu", i);
				return ST_MISMATCH;
			}
	}
	return ST_OK;
}

/* ---- control messages ------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return ntohl(v); }

static void msg_encode(uint8_t *b, const struct msg *m)
{
	memset(b, 0, CTRL_LEN);
	put32(b, CTRL_MAGIC);
	b[4] = m->type;
	b[5] = m->test;
	b[6] = m->dir;
	b[7] = m->status;
	put32(b + 8, m->iter);
	put32(b + 12, m->size);
	put32(b + 16, (uint32_t)(m->addr >> 32));
	put32(b + 20, (uint32_t)m->addr);
	put32(b + 24, m->stag);
	put32(b + 28, m->len);
}

static int msg_decode(const uint8_t *b, uint32_t n, struct msg *m)
{
	if (n != CTRL_LEN || get32(b) != CTRL_MAGIC)
		return -1;
	m->type = b[4];
	m->test = b[5];
	m->dir = b[6];
	m->status = b[7];
	m->iter = get32(b + 8);
	m->size = get32(b + 12);
	m->addr = (uint64_t)get32(b + 16) << 32 | get32(b + 20);
	m->stag = get32(b + 24);
	m->len = get32(b + 28);
	return 0;
}

/* ---- completions ------------------------------------------------------ */

// Prints pending asynchronous events; returns 1 if one of them means the
// QP is broken.
static int drain_async(struct ctx *c)
{
	struct ibv_async_event ev;
	int fatal = 0;
	if (!c->id || !c->id->verbs)
		return 0;
	int fd = c->id->verbs->async_fd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (ibv_get_async_event(c->id->verbs, &ev) == 0) {
		outf("ASYNC event=\"%s\"\n", ibv_event_type_str(ev.event_type));
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_DEVICE_FATAL:
			fatal = 1;
			break;
		default:
			break;
		}
		ibv_ack_async_event(&ev);
	}
	if (fatal)
		c->dead = 1;
	return fatal;
}

// Handles a connection event that arrives while data moves: any event then
// (DISCONNECTED above all) ends the session. Returns 1 if it did.
static int conn_event(struct ctx *c)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(c->ec, &ev))
		return 0;
	errf("connection event %s (status %d)", rdma_event_str(ev->event), ev->status);
	outf("CONNECTION event=%s\n", rdma_event_str(ev->event));
	rdma_ack_cm_event(ev);
	c->dead = 1;
	return 1;
}

// Waits for one completion on cq. Returns 1 with *wc filled, 0 on timeout,
// -1 on error.
static int cq_wait(struct ctx *c, struct ibv_cq *cq, struct ibv_comp_channel *ch, struct ibv_wc *wc)
{
	int64_t deadline = now_ms() + c->o.timeout_ms;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n < 0 ? -1 : 1;
		if (ibv_req_notify_cq(cq, 0))
			return -1;
		n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n < 0 ? -1 : 1;
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return 0;
		// Besides the CQ, watch the connection: after a Terminate or a peer
		// that went away, siw may never complete or flush outstanding work,
		// but rdma_cm reports the disconnect and verbs an async error.
		struct pollfd pfd[3] = {
			{ .fd = ch->fd, .events = POLLIN },
			{ .fd = c->ec->fd, .events = POLLIN },
			{ .fd = c->id->verbs->async_fd, .events = POLLIN },
		};
		int r = poll(pfd, 3, (int)left);
		if (r < 0 && errno != EINTR)
			return -1;
		struct ibv_cq *ecq;
		void *ectx;
		if (r > 0 && (pfd[0].revents & POLLIN) && ibv_get_cq_event(ch, &ecq, &ectx) == 0)
			ibv_ack_cq_events(ecq, 1);
		if (r > 0 && (pfd[1].revents & POLLIN) && conn_event(c))
			return -1;
		if (r > 0 && (pfd[2].revents & POLLIN) && drain_async(c))
			return -1;
	}
}

// Discards notifications left over from earlier arming of ch.
static void drain_channel(struct ibv_comp_channel *ch)
{
	struct ibv_cq *ecq;
	void *ectx;
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	while (ibv_get_cq_event(ch, &ecq, &ectx) == 0)
		ibv_ack_cq_events(ecq, 1);
}

static int fail_conn(struct ctx *c, const char *what, const struct ibv_wc *wc)
{
	if (wc)
		errf("%s: completion status %s (%d), vendor error 0x%x", what, ibv_wc_status_str(wc->status),
		     wc->status, wc->vendor_err);
	else
		errf("%s", what);
	c->dead = 1;
	drain_async(c);
	return -1;
}

// Waits for the completion of the send-queue work request id. Send
// completions arrive in posting order on an RC QP.
static int wait_send(struct ctx *c, uint64_t id, const char *what)
{
	struct ibv_wc wc;
	for (;;) {
		int r = cq_wait(c, c->scq, c->sch, &wc);
		if (r == 0) {
			errf("%s: no completion within %d ms", what, c->o.timeout_ms);
			return -2;
		}
		if (r < 0)
			return fail_conn(c, what, NULL);
		if (wc.status != IBV_WC_SUCCESS)
			return fail_conn(c, what, &wc);
		if (wc.wr_id == id)
			return 0;
	}
}

// Waits for the (single outstanding) receive.
static int wait_recv(struct ctx *c, struct ibv_wc *wc, const char *what)
{
	int r = cq_wait(c, c->rcq, c->rch, wc);
	if (r == 0) {
		errf("%s: nothing received within %d ms", what, c->o.timeout_ms);
		return -2;
	}
	if (r < 0)
		return fail_conn(c, what, NULL);
	if (wc->status != IBV_WC_SUCCESS)
		return fail_conn(c, what, wc);
	return 0;
}

/* ---- posting ---------------------------------------------------------- */

static int post_recv_sges(struct ctx *c, struct ibv_sge *sg, int n)
{
	struct ibv_recv_wr wr = { .wr_id = ++c->wr_seq, .sg_list = sg, .num_sge = n }, *bad;
	int r = ibv_post_recv(c->qp, &wr, &bad);
	if (r)
		errf("ibv_post_recv: %s", strerror(r));
	return r ? -1 : 0;
}

static int post_ctrl_recv(struct ctx *c)
{
	struct ibv_sge sg = { .addr = (uintptr_t)c->crecv, .length = CTRL_LEN, .lkey = c->crecv_mr->lkey };
	return post_recv_sges(c, &sg, 1);
}

static int post_data_recv(struct ctx *c, uint8_t *base, struct ibv_mr *mr, const struct layout *l)
{
	struct ibv_sge sg[MAX_SGE];
	for (int j = 0; j < l->k; j++)
		sg[j] = (struct ibv_sge){ .addr = (uintptr_t)(base + l->off[j]), .length = (uint32_t)l->len[j],
					  .lkey = mr->lkey };
	return post_recv_sges(c, sg, l->k);
}

static int post_send_wr(struct ctx *c, struct ibv_send_wr *wr, uint64_t *id)
{
	struct ibv_send_wr *bad;
	wr->wr_id = *id = ++c->wr_seq;
	wr->send_flags |= IBV_SEND_SIGNALED;
	int r = ibv_post_send(c->qp, wr, &bad);
	if (r)
		errf("ibv_post_send (opcode %d): %s", wr->opcode, strerror(r));
	return r ? -1 : 0;
}

static void layout_sges(struct ibv_sge *sg, uint8_t *base, struct ibv_mr *mr, const struct layout *l)
{
	for (int j = 0; j < l->k; j++)
		sg[j] = (struct ibv_sge){ .addr = (uintptr_t)(base + l->off[j]), .length = (uint32_t)l->len[j],
					  .lkey = mr->lkey };
}

static int send_ctrl(struct ctx *c, const struct msg *m)
{
	uint64_t id;
	msg_encode(c->csend, m);
	struct ibv_sge sg = { .addr = (uintptr_t)c->csend, .length = CTRL_LEN, .lkey = c->csend_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND };
	if (c->o.verbose)
		errf("send %s test=%d dir=%d iter=%u size=%u status=%d", msg_names[m->type], m->test, m->dir, m->iter,
		     m->size, m->status);
	if (post_send_wr(c, &wr, &id))
		return -1;
	return wait_send(c, id, "control send");
}

// Receives the control message the protocol says comes next (the receive
// for it was posted before). want 0 accepts HELLO, BEGIN and BYE.
static int recv_ctrl(struct ctx *c, int want, const struct phase *ph, struct msg *m)
{
	struct ibv_wc wc;
	int r = wait_recv(c, &wc, want ? msg_names[want] : "next message");
	if (r)
		return r;
	if (msg_decode(c->crecv, wc.byte_len, m)) {
		errf("received a %u-byte message that is not a control message", wc.byte_len);
		return -3;
	}
	if (c->o.verbose)
		errf("recv %s test=%d dir=%d iter=%u size=%u status=%d", m->type < 8 ? msg_names[m->type] : "?", m->test,
		     m->dir, m->iter, m->size, m->status);
	if (want && m->type != want) {
		errf("expected %s, received type %d", msg_names[want], m->type);
		return -3;
	}
	if (ph && (m->test != ph->test || m->dir != ph->dir || m->iter != ph->iter || m->size != ph->size)) {
		errf("%s does not echo the phase", msg_names[m->type]);
		return -3;
	}
	return 0;
}

static struct msg ph_msg(const struct phase *ph, int type, int status)
{
	return (struct msg){ .type = (uint8_t)type, .test = (uint8_t)ph->test, .dir = (uint8_t)ph->dir,
			     .status = (uint8_t)status, .iter = ph->iter, .size = ph->size };
}

/* ---- provoking a Terminate ------------------------------------------- */

// The buffer this side advertises as an RDMA Write sink. In provoke mode it
// is one the peer's Write must fail on: an MR without remote write access,
// or an address range running past the end of the MR.
static void sink_advert(struct ctx *c, uint32_t size, struct msg *m)
{
	m->addr = (uintptr_t)c->buf;
	m->stag = c->buf_mr->rkey;
	m->len = size;
	if (c->o.provoke == 1) {
		m->stag = c->noacc_mr->rkey;
	} else if (c->o.provoke == 2) {
		m->addr = (uintptr_t)c->buf + c->buflen - size / 2;
	}
}

// After advertising a bad sink, the peer's Write must end the connection.
static int provoked_outcome(struct ctx *c, int r)
{
	if (r == -1 && c->dead) {
		c->terminated = 1;
		outf("TERMINATED role=%s provoke=%s\n", c->o.server ? "server" : "client",
		     c->o.provoke == 1 ? "access" : "bounds");
		return ST_TERMINATED;
	}
	return ST_NOT_TERMINATED;
}

/* ---- phases ----------------------------------------------------------- */

static int is_write(int t) { return t == WRITE || t == WRITE_SGE; }
static int is_send(int t) { return t == SEND || t == SEND_SE || t == SEND_SGE || t == SEND_INV; }

static int test_sges(struct ctx *c, int t, int recv_side)
{
	if (t == SEND_SGE)
		return recv_side ? c->rsge : c->nsge;
	if (t == WRITE_SGE)
		return recv_side ? 1 : c->nsge;
	return 1;
}

// Posts the data message of a send test (this side is the source).
static int post_data_send(struct ctx *c, const struct phase *ph, uint32_t inv_stag, uint64_t *id)
{
	struct layout l;
	struct ibv_sge sg[MAX_SGE];
	make_layout(&l, ph->size, test_sges(c, ph->test, 0));
	layout_fill(c->buf, &l, phase_seed(ph), 0);
	layout_sges(sg, c->buf, c->buf_mr, &l);
	struct ibv_send_wr wr = { .sg_list = sg, .num_sge = l.k, .opcode = IBV_WR_SEND };
	if (ph->test == SEND_SE)
		wr.send_flags = IBV_SEND_SOLICITED;
	if (ph->test == SEND_INV) {
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.invalidate_rkey = inv_stag;
		// libsiw (rdma-core 44) takes the STag to invalidate from
		// wr.rdma.rkey instead of invalidate_rkey; a Send ignores wr.rdma
		// everywhere else, so setting both is safe.
		wr.wr.rdma.rkey = inv_stag;
	}
	return post_send_wr(c, &wr, id);
}

static int post_write(struct ctx *c, const struct phase *ph, const struct msg *dst, uint64_t *id)
{
	struct layout l;
	struct ibv_sge sg[MAX_SGE];
	if (dst->len < ph->size) {
		errf("advertised sink of %u bytes is smaller than %u", dst->len, ph->size);
		return -3;
	}
	make_layout(&l, ph->size, test_sges(c, ph->test, 0));
	layout_fill(c->buf, &l, phase_seed(ph), 0);
	layout_sges(sg, c->buf, c->buf_mr, &l);
	struct ibv_send_wr wr = { .sg_list = sg, .num_sge = l.k, .opcode = IBV_WR_RDMA_WRITE };
	wr.wr.rdma.remote_addr = dst->addr;
	wr.wr.rdma.rkey = dst->stag;
	return post_send_wr(c, &wr, id);
}

// Reads size bytes from the advertised source into the local buffer (one
// SGE: siw's max_sge_rd is 1) and checks them.
static int do_read(struct ctx *c, const struct phase *ph, const struct msg *src)
{
	struct layout l;
	uint64_t id;
	if (src->len < ph->size) {
		errf("advertised source of %u bytes is smaller than %u", src->len, ph->size);
		return -3;
	}
	make_layout(&l, ph->size, 1);
	layout_fill(c->buf, &l, phase_seed(ph), 1);
	struct ibv_sge sg = { .addr = (uintptr_t)c->buf, .length = ph->size, .lkey = c->buf_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_READ };
	wr.wr.rdma.remote_addr = src->addr;
	wr.wr.rdma.rkey = src->stag;
	if (post_send_wr(c, &wr, &id))
		return -1;
	int r = wait_send(c, id, "RDMA Read");
	if (r)
		return r;
	return layout_check(c->buf, &l, phase_seed(ph), c->o.verbose);
}

// Polls for the data receive without re-arming the CQ, so that a
// solicited-only arming made before stays as it was.
static int poll_recv(struct ctx *c, struct ibv_wc *wc, const char *what)
{
	int64_t deadline = now_ms() + c->o.timeout_ms;
	for (;;) {
		int n = ibv_poll_cq(c->rcq, 1, wc);
		if (n < 0)
			return fail_conn(c, what, NULL);
		if (n == 1)
			return wc->status == IBV_WC_SUCCESS ? 0 : fail_conn(c, what, wc);
		if (now_ms() > deadline) {
			errf("%s: nothing received within %d ms", what, c->o.timeout_ms);
			return -2;
		}
		usleep(500);
	}
}

// Receive side of a send test: checks the completion and the data.
static int check_data_recv(struct ctx *c, const struct phase *ph, const struct layout *l, uint32_t inv_stag)
{
	struct ibv_wc wc;
	int st = ST_OK;
	int r;
	if (ph->test == SEND_SE) {
		// The CQ was armed for solicited events only before the peer was
		// told to send, and nothing else completes on it meanwhile: a
		// pending event means the Send carried the Solicited Event bit.
		r = poll_recv(c, &wc, "Send with Solicited Event");
		if (r)
			return r;
		struct ibv_cq *ecq;
		void *ectx;
		int event = 0;
		for (int64_t until = now_ms() + 100; !event && now_ms() < until; usleep(1000))
			if (ibv_get_cq_event(c->rch, &ecq, &ectx) == 0) {
				ibv_ack_cq_events(ecq, 1);
				event = 1;
			}
		outf("SOLICITED role=%s iter=%u size=%u event=%s\n", c->o.server ? "server" : "client", ph->iter, ph->size,
		     event ? "yes" : "no");
		if (!event && c->o.require_se_event)
			st = ST_SOLICITED;
	} else {
		r = wait_recv(c, &wc, "data Send");
		if (r)
			return r;
	}
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != ph->size) {
		errf("data Send: opcode %d, %u bytes, want %u", wc.opcode, wc.byte_len, ph->size);
		return ST_LENGTH;
	}
	if (ph->test == SEND_INV) {
		// A provider that reports invalidations must name our STag. libsiw
		// reports none (wc_flags is always 0), but siw completes the
		// receive in error if the invalidation failed, so success there
		// means the STag was invalidated.
		int reported = (wc.wc_flags & IBV_WC_WITH_INV) != 0;
		outf("INVALIDATE role=%s iter=%u size=%u stag=0x%08x reported=%s\n", c->o.server ? "server" : "client",
		     ph->iter, ph->size, inv_stag, reported ? "yes" : "no");
		if (reported && wc.invalidated_rkey != inv_stag) {
			errf("Send with Invalidate: invalidated STag 0x%08x, want 0x%08x", wc.invalidated_rkey, inv_stag);
			st = ST_INVALIDATE;
		}
		if (!reported && c->o.require_inv_report) {
			errf("Send with Invalidate: the completion does not report the invalidation");
			st = ST_INVALIDATE;
		}
	} else if (wc.wc_flags & IBV_WC_WITH_INV) {
		errf("unexpected invalidation of STag 0x%08x", wc.invalidated_rkey);
		st = ST_INVALIDATE;
	}
	int d = layout_check(c->buf, l, phase_seed(ph), c->o.verbose);
	return d != ST_OK ? d : st;
}

// Prepares this side to receive the data message of a send test: sink
// pattern, posted receive, solicited-only arming. Must run before this side
// sends the message that lets the peer send.
static int arm_data_recv(struct ctx *c, const struct phase *ph, struct layout *l)
{
	make_layout(l, ph->size, test_sges(c, ph->test, 1));
	layout_fill(c->buf, l, phase_seed(ph), 1);
	if (post_data_recv(c, c->buf, c->buf_mr, l))
		return -1;
	if (ph->test == SEND_SE) {
		drain_channel(c->rch);
		if (ibv_req_notify_cq(c->rcq, 1))
			return -1;
	}
	return 0;
}

static struct ibv_mr *reg_inv_region(struct ctx *c, uint8_t *mem)
{
	struct ibv_mr *mr = ibv_reg_mr(c->pd, mem, INV_REGION,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		errf("ibv_reg_mr (invalidation region): %s", strerror(errno));
	return mr;
}

// Posts the RDMA Write and, right behind it, the DONE control message
// without waiting: RDMAP ordering delivers the Send only after the Write
// data is placed, so DONE tells the peer the data is there.
static int write_and_done(struct ctx *c, const struct phase *ph, const struct msg *dst)
{
	uint64_t id, did;
	int r;
	if ((r = post_write(c, ph, dst, &id)))
		return r;
	struct msg done = ph_msg(ph, T_DONE, 0);
	msg_encode(c->csend, &done);
	struct ibv_sge sg = { .addr = (uintptr_t)c->csend, .length = CTRL_LEN, .lkey = c->csend_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND };
	if (post_send_wr(c, &wr, &did))
		return -1;
	if ((r = wait_send(c, id, "RDMA Write")) || (r = wait_send(c, did, "DONE")))
		return r;
	return 0;
}

// One phase, client side. Returns a status (>= 0) or < 0 if the session
// cannot go on.
static int client_phase(struct ctx *c, const struct phase *ph)
{
	struct msg m, begin = ph_msg(ph, T_BEGIN, 0);
	struct layout l;
	uint64_t id;
	int r, st;
	uint8_t *invmem = c->invmem;
	struct ibv_mr *inv = NULL;

	if (ph->dir == 0) { /* the client is the data source */
		if (ph->test == READ) {
			make_layout(&l, ph->size, 1);
			layout_fill(c->buf, &l, phase_seed(ph), 0);
			begin.addr = (uintptr_t)c->buf;
			begin.stag = c->buf_mr->rkey;
			begin.len = ph->size;
			if (post_ctrl_recv(c) || send_ctrl(c, &begin))
				return -1;
			if ((r = recv_ctrl(c, T_ACK, ph, &m)))
				return r;
			return m.status;
		}
		if (post_ctrl_recv(c) || send_ctrl(c, &begin))
			return -1;
		int want = is_send(ph->test) && ph->test != SEND_INV ? T_GO : T_BUF;
		if ((r = recv_ctrl(c, want, ph, &m)))
			return r;
		if (post_ctrl_recv(c))
			return -1;
		if (is_write(ph->test)) {
			if ((r = write_and_done(c, ph, &m)))
				return r;
		} else {
			if ((r = post_data_send(c, ph, m.stag, &id)) || (r = wait_send(c, id, "data Send")))
				return r;
		}
		if ((r = recv_ctrl(c, T_ACK, ph, &m)))
			return r;
		return m.status;
	}

	/* the server is the data source */
	if (is_write(ph->test)) {
		make_layout(&l, ph->size, 1);
		layout_fill(c->buf, &l, phase_seed(ph), 1);
		sink_advert(c, ph->size, &begin);
		if (post_ctrl_recv(c) || send_ctrl(c, &begin))
			return -1;
		r = recv_ctrl(c, T_DONE, ph, &m);
		if (c->o.provoke)
			return provoked_outcome(c, r);
		if (r)
			return r;
		st = m.status ? m.status : layout_check(c->buf, &l, phase_seed(ph), c->o.verbose);
	} else if (ph->test == READ) {
		if (post_ctrl_recv(c) || send_ctrl(c, &begin))
			return -1;
		if ((r = recv_ctrl(c, T_BUF, ph, &m)))
			return r;
		st = do_read(c, ph, &m);
		if (st < 0)
			return st;
	} else { /* sends */
		if (ph->test == SEND_INV) {
			if (!(inv = reg_inv_region(c, invmem)))
				return -1;
			begin.addr = (uintptr_t)invmem;
			begin.stag = inv->rkey;
			begin.len = INV_REGION;
		}
		if (arm_data_recv(c, ph, &l) || send_ctrl(c, &begin)) {
			if (inv)
				ibv_dereg_mr(inv);
			return -1;
		}
		st = check_data_recv(c, ph, &l, inv ? inv->rkey : 0);
		if (inv)
			ibv_dereg_mr(inv);
		if (st < 0)
			return st;
	}
	struct msg ack = ph_msg(ph, T_ACK, st);
	if (post_ctrl_recv(c) || send_ctrl(c, &ack))
		return -1;
	if ((r = recv_ctrl(c, T_ACK, ph, &m)))
		return r;
	return m.status;
}

// One phase, server side; m1 is the BEGIN that opened it.
static int server_phase(struct ctx *c, const struct phase *ph, const struct msg *m1)
{
	struct msg m, out;
	struct layout l;
	uint64_t id;
	int r, st;
	uint8_t *invmem = c->invmem;
	struct ibv_mr *inv = NULL;

	if (ph->dir == 0) { /* the client is the data source */
		if (ph->test == READ) {
			st = do_read(c, ph, m1);
			if (st < 0)
				return st;
		} else if (is_write(ph->test)) {
			make_layout(&l, ph->size, 1);
			layout_fill(c->buf, &l, phase_seed(ph), 1);
			out = ph_msg(ph, T_BUF, 0);
			sink_advert(c, ph->size, &out);
			if (post_ctrl_recv(c) || send_ctrl(c, &out))
				return -1;
			r = recv_ctrl(c, T_DONE, ph, &m);
			if (c->o.provoke)
				return provoked_outcome(c, r);
			if (r)
				return r;
			st = layout_check(c->buf, &l, phase_seed(ph), c->o.verbose);
		} else {
			out = ph_msg(ph, T_GO, 0);
			if (ph->test == SEND_INV) {
				if (!(inv = reg_inv_region(c, invmem)))
					return -1;
				out.type = T_BUF;
				out.addr = (uintptr_t)invmem;
				out.stag = inv->rkey;
				out.len = INV_REGION;
			}
			if (arm_data_recv(c, ph, &l) || send_ctrl(c, &out)) {
				if (inv)
					ibv_dereg_mr(inv);
				return -1;
			}
			st = check_data_recv(c, ph, &l, inv ? inv->rkey : 0);
			if (inv)
				ibv_dereg_mr(inv);
			if (st < 0)
				return st;
		}
		out = ph_msg(ph, T_ACK, st);
		if (post_ctrl_recv(c) || send_ctrl(c, &out))
			return -1;
		return st;
	}

	/* the server is the data source */
	if (post_ctrl_recv(c))
		return -1;
	if (is_write(ph->test)) {
		if ((r = write_and_done(c, ph, m1)))
			return r;
	} else if (ph->test == READ) {
		make_layout(&l, ph->size, 1);
		layout_fill(c->buf, &l, phase_seed(ph), 0);
		out = ph_msg(ph, T_BUF, 0);
		out.addr = (uintptr_t)c->buf;
		out.stag = c->buf_mr->rkey;
		out.len = ph->size;
		if (send_ctrl(c, &out))
			return -1;
	} else {
		if ((r = post_data_send(c, ph, m1->stag, &id)) || (r = wait_send(c, id, "data Send")))
			return r;
	}
	if ((r = recv_ctrl(c, T_ACK, ph, &m)))
		return r;
	st = m.status;
	out = ph_msg(ph, T_ACK, st);
	if (post_ctrl_recv(c) || send_ctrl(c, &out))
		return -1;
	return st;
}

/* ---- results ---------------------------------------------------------- */

// Results are printed per test, size and direction, over the iterations.
struct agg {
	int on, test, dir, status;
	uint32_t size, iters;
};

static int n_ok, n_failed;

static void agg_flush(struct ctx *c, struct agg *a)
{
	if (!a->on)
		return;
	outf("RESULT role=%s test=%s dir=%s size=%u iters=%u status=%s\n", c->o.server ? "server" : "client",
	     test_names[a->test], a->dir ? "s2c" : "c2s", a->size, a->iters,
	     a->status < NSTATUS ? status_names[a->status] : "unknown");
	if (a->status == ST_OK)
		n_ok++;
	else
		n_failed++;
	a->on = 0;
}

static void agg_flush_all(struct ctx *c, struct agg a[2])
{
	agg_flush(c, &a[0]);
	agg_flush(c, &a[1]);
}

static void agg_add(struct ctx *c, struct agg a[2], const struct phase *ph, int st)
{
	struct agg *x = &a[ph->dir];
	if (x->on && (x->test != ph->test || x->size != ph->size))
		agg_flush_all(c, a);
	if (!x->on)
		*x = (struct agg){ .on = 1, .test = ph->test, .dir = ph->dir, .size = ph->size };
	x->iters++;
	if (x->status == ST_OK)
		x->status = st;
}

static int status_of(int r)
{
	return r == -2 ? ST_TIMEOUT : r == -3 ? ST_PROTOCOL : ST_OPERR;
}

/* ---- connection management ------------------------------------------- */

static const char *hex(const void *p, size_t n, char *out, size_t cap)
{
	const uint8_t *b = p;
	size_t i;
	out[0] = 0;
	for (i = 0; i < n && 2 * i + 2 < cap; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	return n ? out : "-";
}

static void print_pdata(const char *what, const struct rdma_conn_param *cp)
{
	char h[2 * 256 + 1], t[256 + 1];
	size_t n = cp->private_data_len, i;
	for (i = 0; i < n && i < 256; i++) {
		char ch = ((const char *)cp->private_data)[i];
		t[i] = ch >= 0x20 && ch < 0x7f && ch != '"' ? ch : '.';
	}
	t[i] = 0;
	outf("%s ird=%u ord=%u private_data_len=%zu private_data=%s text=\"%s\"\n", what, cp->responder_resources,
	     cp->initiator_depth, n, hex(cp->private_data, n, h, sizeof h), t);
}

// Waits for the next CM event; returns it (to be acked) or NULL on timeout.
static struct rdma_cm_event *cm_wait(struct ctx *c, int timeout_ms)
{
	struct rdma_cm_event *ev;
	struct pollfd pfd = { .fd = c->ec->fd, .events = POLLIN };
	int64_t deadline = now_ms() + timeout_ms;
	for (;;) {
		if (rdma_get_cm_event(c->ec, &ev) == 0)
			return ev;
		if (errno != EAGAIN) {
			errf("rdma_get_cm_event: %s", strerror(errno));
			return NULL;
		}
		int64_t left = deadline - now_ms();
		if (left <= 0) {
			errf("no connection event within %d ms", timeout_ms);
			return NULL;
		}
		poll(&pfd, 1, (int)left);
	}
}

static int cm_expect(struct ctx *c, enum rdma_cm_event_type want, int timeout_ms)
{
	struct rdma_cm_event *ev = cm_wait(c, timeout_ms);
	if (!ev)
		return -1;
	int ok = ev->event == want;
	if (!ok)
		errf("expected %s, got %s (status %d)", rdma_event_str(want), rdma_event_str(ev->event), ev->status);
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

static int setup_verbs(struct ctx *c, struct rdma_cm_id *id)
{
	struct ibv_device_attr da;
	if (ibv_query_device(id->verbs, &da)) {
		errf("ibv_query_device failed");
		return -1;
	}
	int dev_sge = da.max_sge < MAX_SGE ? da.max_sge : MAX_SGE;
	c->nsge = c->o.nsge < dev_sge ? c->o.nsge : dev_sge;
	c->rsge = c->nsge;
	if (c->nsge < 1)
		c->nsge = c->rsge = 1;
	if (!(c->pd = ibv_alloc_pd(id->verbs)) || !(c->sch = ibv_create_comp_channel(id->verbs)) ||
	    !(c->rch = ibv_create_comp_channel(id->verbs)) ||
	    !(c->scq = ibv_create_cq(id->verbs, 32, NULL, c->sch, 0)) ||
	    !(c->rcq = ibv_create_cq(id->verbs, 8, NULL, c->rch, 0))) {
		errf("allocating PD/CQs: %s", strerror(errno));
		return -1;
	}
	fcntl(c->sch->fd, F_SETFL, fcntl(c->sch->fd, F_GETFL) | O_NONBLOCK);
	fcntl(c->rch->fd, F_SETFL, fcntl(c->rch->fd, F_GETFL) | O_NONBLOCK);
	struct ibv_qp_init_attr qa = {
		.send_cq = c->scq, .recv_cq = c->rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = (uint32_t)c->nsge,
			 .max_recv_sge = (uint32_t)c->rsge },
	};
	if (rdma_create_qp(id, c->pd, &qa)) {
		errf("rdma_create_qp: %s", strerror(errno));
		return -1;
	}
	c->qp = id->qp;
	c->buflen = (size_t)c->maxsize + 4096;
	if (posix_memalign((void **)&c->buf, 4096, c->buflen) || posix_memalign((void **)&c->csend, 64, CTRL_LEN) ||
	    posix_memalign((void **)&c->crecv, 64, CTRL_LEN) || posix_memalign((void **)&c->invmem, 4096, INV_REGION)) {
		errf("out of memory for %zu bytes", c->buflen);
		return -1;
	}
	memset(c->buf, 0, c->buflen);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (!(c->buf_mr = ibv_reg_mr(c->pd, c->buf, c->buflen, acc)) ||
	    !(c->csend_mr = ibv_reg_mr(c->pd, c->csend, CTRL_LEN, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(c->crecv_mr = ibv_reg_mr(c->pd, c->crecv, CTRL_LEN, IBV_ACCESS_LOCAL_WRITE))) {
		errf("ibv_reg_mr: %s", strerror(errno));
		return -1;
	}
	if (c->o.provoke == 1 &&
	    !(c->noacc_mr = ibv_reg_mr(c->pd, c->buf, c->buflen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ))) {
		errf("ibv_reg_mr (no remote write): %s", strerror(errno));
		return -1;
	}
	if (c->o.verbose)
		errf("device %s: max_sge %d, max_sge_rd %d, max_qp_rd_atom %d; using %d SGEs",
		     ibv_get_device_name(id->verbs->device), da.max_sge, da.max_sge_rd, da.max_qp_rd_atom, c->nsge);
	return 0;
}

static void teardown(struct ctx *c)
{
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->noacc_mr)
		ibv_dereg_mr(c->noacc_mr);
	if (c->buf_mr)
		ibv_dereg_mr(c->buf_mr);
	if (c->csend_mr)
		ibv_dereg_mr(c->csend_mr);
	if (c->crecv_mr)
		ibv_dereg_mr(c->crecv_mr);
	if (c->scq)
		ibv_destroy_cq(c->scq);
	if (c->rcq)
		ibv_destroy_cq(c->rcq);
	if (c->sch)
		ibv_destroy_comp_channel(c->sch);
	if (c->rch)
		ibv_destroy_comp_channel(c->rch);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->listen_id)
		rdma_destroy_id(c->listen_id);
	if (c->ec)
		rdma_destroy_event_channel(c->ec);
	free(c->buf);
	free(c->csend);
	free(c->crecv);
	free(c->invmem);
}

static struct rdma_conn_param conn_param(struct ctx *c)
{
	return (struct rdma_conn_param){
		.responder_resources = (uint8_t)c->o.ird, .initiator_depth = (uint8_t)c->o.ord,
		.private_data = c->o.pdata, .private_data_len = c->o.pdata ? (uint8_t)strlen(c->o.pdata) : 0,
		.retry_count = 7, .rnr_retry_count = 7,
	};
}

static int resolve(struct ctx *c, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)c->o.port);
	if (c->o.addr && inet_pton(AF_INET, c->o.addr, &sa->sin_addr) != 1) {
		errf("not an IPv4 address: %s", c->o.addr);
		return -1;
	}
	return 0;
}

/* ---- sessions --------------------------------------------------------- */

static int disconnect_wait(struct ctx *c)
{
	rdma_disconnect(c->id);
	return cm_expect(c, RDMA_CM_EVENT_DISCONNECTED, c->o.timeout_ms);
}

static int run_client(struct ctx *c)
{
	struct sockaddr_in sa;
	struct rdma_cm_event *ev;
	struct msg m;
	if (resolve(c, &sa) || rdma_create_id(c->ec, &c->id, c, RDMA_PS_TCP)) {
		errf("rdma_create_id: %s", strerror(errno));
		return 1;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&sa, c->o.timeout_ms) ||
	    cm_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, c->o.timeout_ms) ||
	    rdma_resolve_route(c->id, c->o.timeout_ms) ||
	    cm_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, c->o.timeout_ms)) {
		errf("cannot resolve %s:%d (%s)", c->o.addr, c->o.port, strerror(errno));
		return 1;
	}
	if (setup_verbs(c, c->id) || post_ctrl_recv(c))
		return 1;
	struct rdma_conn_param cp = conn_param(c);
	if (rdma_connect(c->id, &cp)) {
		errf("rdma_connect: %s", strerror(errno));
		return 1;
	}
	if (!(ev = cm_wait(c, c->o.timeout_ms)))
		return 1;
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		char what[64];
		snprintf(what, sizeof what, "REJECT role=client status=%d", ev->status);
		print_pdata(what, &ev->param.conn);
		rdma_ack_cm_event(ev);
		return c->o.expect_reject ? 0 : 1;
	}
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		errf("connect: %s (status %d)", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return 1;
	}
	print_pdata("ESTABLISHED role=client", &ev->param.conn);
	rdma_ack_cm_event(ev);
	if (c->o.expect_reject) {
		errf("the connection was accepted, a reject was expected");
		return 1;
	}

	struct msg hello = { .type = T_HELLO, .size = c->maxsize, .iter = (uint32_t)c->o.iters };
	if (send_ctrl(c, &hello) || recv_ctrl(c, T_HELLO, NULL, &m))
		return 1;
	if (m.status) {
		errf("the server refused the session (status %d)", m.status);
		return 1;
	}
	struct agg a[2] = { { 0 }, { 0 } };
	int fatal = 0;
	for (int t = 0; t < c->o.ntests && !fatal; t++)
		for (int s = 0; s < c->o.nsizes && !fatal; s++)
			for (int i = 0; i < c->o.iters && !fatal; i++)
				for (int d = 0; d < 2 && !fatal; d++) {
					if (!(c->o.dirs & (1 << d)))
						continue;
					struct phase ph = { c->o.tests[t], d, (uint32_t)i, c->o.sizes[s] };
					int r = client_phase(c, &ph);
					if (r < 0) {
						fatal = 1;
						r = status_of(r);
					}
					agg_add(c, a, &ph, r);
					if (c->terminated || r == ST_NOT_TERMINATED)
						fatal = 1;
				}
	agg_flush_all(c, a);
	if (!fatal) {
		struct msg bye = { .type = T_BYE };
		if (post_ctrl_recv(c) || send_ctrl(c, &bye) || recv_ctrl(c, T_BYE, NULL, &m))
			fatal = 1;
	}
	if (!c->dead)
		disconnect_wait(c);
	outf("SUMMARY role=client ok=%d failed=%d\n", n_ok, n_failed);
	if (c->o.provoke)
		return c->terminated ? 0 : 1;
	if (c->o.expect_error)
		return (c->dead || n_failed) ? 0 : 1;
	return (fatal || n_failed) ? 1 : 0;
}

static int run_server(struct ctx *c)
{
	struct sockaddr_in sa;
	struct rdma_cm_event *ev;
	struct msg m;
	if (resolve(c, &sa) || rdma_create_id(c->ec, &c->listen_id, c, RDMA_PS_TCP) ||
	    rdma_bind_addr(c->listen_id, (struct sockaddr *)&sa) || rdma_listen(c->listen_id, 1)) {
		errf("listen on %s:%d: %s", c->o.addr ? c->o.addr : "0.0.0.0", c->o.port, strerror(errno));
		return 1;
	}
	outf("LISTENING port=%d\n", c->o.port);
	if (!(ev = cm_wait(c, c->o.wait_ms)))
		return 1;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		errf("expected a connect request, got %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		return 1;
	}
	c->id = ev->id;
	print_pdata("CONNECT role=server", &ev->param.conn);
	rdma_ack_cm_event(ev);
	struct rdma_conn_param cp = conn_param(c);
	if (c->o.reject) {
		int r = rdma_reject(c->id, cp.private_data, cp.private_data_len);
		outf("REJECTED role=server private_data_len=%u\n", cp.private_data_len);
		// rdma_reject() only queues the reject with the kernel's CM; a short
		// pause before the id is destroyed keeps the frame from racing it.
		usleep(200000);
		return r ? 1 : 0;
	}
	if (setup_verbs(c, c->id) || post_ctrl_recv(c))
		return 1;
	if (rdma_accept(c->id, &cp)) {
		errf("rdma_accept: %s", strerror(errno));
		return 1;
	}
	if (!(ev = cm_wait(c, c->o.timeout_ms)))
		return 1;
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		errf("accept: %s (status %d)", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return 1;
	}
	outf("ESTABLISHED role=server\n");
	rdma_ack_cm_event(ev);

	if (recv_ctrl(c, T_HELLO, NULL, &m))
		return 1;
	struct msg hello = { .type = T_HELLO };
	if (m.size > c->maxsize) {
		errf("the client wants %u-byte messages, the limit is %u (-S)", m.size, c->maxsize);
		hello.status = ST_LENGTH;
	}
	if (post_ctrl_recv(c) || send_ctrl(c, &hello) || hello.status)
		return 1;
	struct agg a[2] = { { 0 }, { 0 } };
	int fatal = 0, bye = 0;
	while (!fatal) {
		if (recv_ctrl(c, 0, NULL, &m)) {
			fatal = 1;
			break;
		}
		if (m.type == T_BYE) {
			bye = 1;
			break;
		}
		if (m.type != T_BEGIN || m.test < 1 || m.test >= NTESTS || m.dir > 1 || m.size < 1 ||
		    m.size > c->maxsize) {
			errf("unexpected message type %d (test %d, dir %d, size %u)", m.type, m.test, m.dir, m.size);
			fatal = 1;
			break;
		}
		struct phase ph = { m.test, m.dir, m.iter, m.size };
		int r = server_phase(c, &ph, &m);
		if (r < 0) {
			fatal = 1;
			r = status_of(r);
		}
		agg_add(c, a, &ph, r);
		if (c->terminated || r == ST_NOT_TERMINATED)
			fatal = 1;
	}
	agg_flush_all(c, a);
	if (bye) {
		struct msg out = { .type = T_BYE };
		if (send_ctrl(c, &out))
			fatal = 1;
		else
			cm_expect(c, RDMA_CM_EVENT_DISCONNECTED, c->o.timeout_ms);
	} else if (!c->dead) {
		disconnect_wait(c);
	}
	outf("SUMMARY role=server ok=%d failed=%d\n", n_ok, n_failed);
	if (c->o.provoke)
		return c->terminated ? 0 : 1;
	if (c->o.expect_error)
		return (c->dead || n_failed) ? 0 : 1;
	return (fatal || n_failed) ? 1 : 0;
}

/* ---- options ---------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: %s -s|-c [options]\n"
		"  -s, --server            wait for one connection\n"
		"  -c, --client            connect and drive the tests\n"
		"  -a, --addr IP           address to listen on (server, default any) or connect to (client)\n"
		"  -p, --port N            port (default 7175)\n"
		"  -T, --tests LIST        comma list of write,read,send,send_se,send_inv,send_sge,write_sge or all\n"
		"                          (client; default all)\n"
		"  -S, --sizes LIST        message sizes, suffix k/m allowed, 1..16m (default 1,4096,65536);\n"
		"                          on the server only the largest matters (default 16m)\n"
		"  -n, --iters N           iterations per test, size and direction (default 1)\n"
		"  -D, --dirs c2s|s2c|both directions of data flow (default both)\n"
		"  -g, --sges N            SGEs for send_sge/write_sge (default 4, capped by the device)\n"
		"  -t, --timeout SEC       limit of every wait (default 30)\n"
		"  -w, --wait SEC          server: how long to wait for a connection (default 120)\n"
		"      --ird N             rdma_cm responder_resources (default 16)\n"
		"      --ord N             rdma_cm initiator_depth (default 16)\n"
		"  -P, --pdata TEXT        private data for connect, accept or reject (at most %d bytes)\n"
		"      --reject            server: reject the connection (with --pdata) and exit\n"
		"      --expect-reject     client: succeed only if the connection is rejected\n"
		"      --provoke MODE      advertise a bad RDMA Write sink (access: no remote write;\n"
		"                          bounds: past the end of the region); succeed only if the\n"
		"                          peer's Write ends the connection\n"
		"      --expect-error      succeed only if an operation fails or the connection is lost\n"
		"      --require-se-event  send_se: fail unless the receive raised a solicited-only CQ event\n"
		"                          (siw on Linux 6.1 never raises one for receives)\n"
		"      --require-inv-report send_inv: fail unless the receive completion reports the\n"
		"                          invalidated STag (libsiw never does)\n"
		"      --print-pattern T,D,I,S  print the data pattern of test T, dir D, iteration I and\n"
		"                          size S (at most 4096) in hex and exit\n"
		"  -v, --verbose           trace every message on stderr\n",
		prog, MAX_PDATA);
}

static int parse_size(const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return -1;
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end || v < 1 || v > MAX_SIZE)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_list(char *s, int (*one)(struct opts *, const char *), struct opts *o)
{
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ","))
		if (one(o, tok))
			return -1;
	return 0;
}

static int add_test(struct opts *o, const char *name)
{
	if (!strcmp(name, "all")) {
		for (int t = 1; t < NTESTS; t++)
			if (add_test(o, test_names[t]))
				return -1;
		return 0;
	}
	for (int t = 1; t < NTESTS; t++)
		if (!strcmp(name, test_names[t])) {
			if (o->ntests >= (int)(sizeof o->tests / sizeof o->tests[0]))
				return -1;
			o->tests[o->ntests++] = t;
			return 0;
		}
	errf("unknown test %s", name);
	return -1;
}

static int add_size(struct opts *o, const char *s)
{
	if (o->nsizes >= (int)(sizeof o->sizes / sizeof o->sizes[0]) || parse_size(s, &o->sizes[o->nsizes])) {
		errf("bad size %s (1..16m)", s);
		return -1;
	}
	o->nsizes++;
	return 0;
}

// Prints the pattern of one phase, so other implementations can check theirs.
static int print_pattern(const char *arg)
{
	unsigned t, d, i, n;
	uint8_t b[4096];
	if (sscanf(arg, "%u,%u,%u,%u", &t, &d, &i, &n) != 4 || n < 1 || n > sizeof b) {
		errf("--print-pattern wants test,dir,iter,size with size 1..4096");
		return 2;
	}
	struct phase ph = { (int)t, (int)d, i, n };
	pattern_fill(b, phase_seed(&ph), 0, n, 0);
	for (unsigned k = 0; k < n; k++)
		printf("%02x", b[k]);
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	static struct ctx c;
	struct opts *o = &c.o;
	enum { O_IRD = 256, O_ORD, O_REJECT, O_EXPECT_REJECT, O_PROVOKE, O_EXPECT_ERROR, O_SE_EVENT, O_INV_REPORT, O_PATTERN };
	static const struct option lo[] = {
		{ "server", no_argument, 0, 's' }, { "client", no_argument, 0, 'c' },
		{ "addr", required_argument, 0, 'a' }, { "port", required_argument, 0, 'p' },
		{ "tests", required_argument, 0, 'T' }, { "sizes", required_argument, 0, 'S' },
		{ "iters", required_argument, 0, 'n' }, { "dirs", required_argument, 0, 'D' },
		{ "sges", required_argument, 0, 'g' }, { "timeout", required_argument, 0, 't' },
		{ "wait", required_argument, 0, 'w' }, { "ird", required_argument, 0, O_IRD },
		{ "ord", required_argument, 0, O_ORD }, { "pdata", required_argument, 0, 'P' },
		{ "reject", no_argument, 0, O_REJECT }, { "expect-reject", no_argument, 0, O_EXPECT_REJECT },
		{ "provoke", required_argument, 0, O_PROVOKE }, { "expect-error", no_argument, 0, O_EXPECT_ERROR },
		{ "require-se-event", no_argument, 0, O_SE_EVENT }, { "require-inv-report", no_argument, 0, O_INV_REPORT },
		{ "print-pattern", required_argument, 0, O_PATTERN }, { "verbose", no_argument, 0, 'v' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	int role = 0, ch;
	o->port = 7175;
	o->iters = 1;
	o->dirs = 3;
	o->nsge = 4;
	o->timeout_ms = 30000;
	o->wait_ms = 120000;
	o->ird = o->ord = 16;
	setvbuf(stdout, NULL, _IOLBF, 0);
	// Registered memory counts against RLIMIT_MEMLOCK; 16 MiB buffers need
	// more than the usual 8 MiB soft limit.
	struct rlimit rl;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	while ((ch = getopt_long(argc, argv, "sca:p:T:S:n:D:g:t:w:P:vh", lo, NULL)) != -1) {
		switch (ch) {
		case 's': role |= 1; break;
		case 'c': role |= 2; break;
		case 'a': o->addr = optarg; break;
		case 'p': o->port = atoi(optarg); break;
		case 'T': if (parse_list(optarg, add_test, o)) return 2; break;
		case 'S': if (parse_list(optarg, add_size, o)) return 2; break;
		case 'n': o->iters = atoi(optarg); break;
		case 'D':
			o->dirs = !strcmp(optarg, "c2s") ? 1 : !strcmp(optarg, "s2c") ? 2 : !strcmp(optarg, "both") ? 3 : 0;
			break;
		case 'g': o->nsge = atoi(optarg); break;
		case 't': o->timeout_ms = atoi(optarg) * 1000; break;
		case 'w': o->wait_ms = atoi(optarg) * 1000; break;
		case O_IRD: o->ird = atoi(optarg); break;
		case O_ORD: o->ord = atoi(optarg); break;
		case 'P': o->pdata = optarg; break;
		case O_REJECT: o->reject = 1; break;
		case O_EXPECT_REJECT: o->expect_reject = 1; break;
		case O_PROVOKE:
			o->provoke = !strcmp(optarg, "access") ? 1 : !strcmp(optarg, "bounds") ? 2 : -1;
			break;
		case O_EXPECT_ERROR: o->expect_error = 1; break;
		case O_SE_EVENT: o->require_se_event = 1; break;
		case O_INV_REPORT: o->require_inv_report = 1; break;
		case O_PATTERN: return print_pattern(optarg);
		case 'v': o->verbose = 1; break;
		case 'h': usage(); return 0;
		default: usage(); return 2;
		}
	}
	if ((role != 1 && role != 2) || optind != argc || o->port < 1 || o->port > 65535 || o->iters < 1 ||
	    !o->dirs || o->timeout_ms <= 0 || o->wait_ms <= 0 || o->ird < 0 || o->ird > 255 || o->ord < 0 ||
	    o->ord > 255 || o->provoke < 0 || o->nsge < 1 || (o->pdata && strlen(o->pdata) > MAX_PDATA) ||
	    (role == 2 && !o->addr) || (o->reject && role != 1) || (o->expect_reject && role != 2)) {
		usage();
		return 2;
	}
	o->server = role == 1;
	if (!o->ntests)
		add_test(o, "all");
	if (!o->nsizes) {
		if (o->server) {
			o->sizes[o->nsizes++] = MAX_SIZE;
		} else {
			o->sizes[o->nsizes++] = 1;
			o->sizes[o->nsizes++] = 4096;
			o->sizes[o->nsizes++] = 65536;
		}
	}
	for (int i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > c.maxsize)
			c.maxsize = o->sizes[i];
	if (o->provoke && c.maxsize < 2)
		c.maxsize = 2;
	if (!(c.ec = rdma_create_event_channel())) {
		errf("rdma_create_event_channel: %s (is an RDMA device up?)", strerror(errno));
		return 1;
	}
	fcntl(c.ec->fd, F_SETFL, fcntl(c.ec->fd, F_GETFL) | O_NONBLOCK);
	int rc = o->server ? run_server(&c) : run_client(&c);
	teardown(&c);
	return rc;
}
