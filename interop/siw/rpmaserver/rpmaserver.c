// rpmaserver: the servers of librpma 1.2's examples 04, 05, 07 and 09,
// replayed for the iwarp-go interop suite, so that an initiator that is
// not librpma can be checked against what those servers declare and do.
// Each run is one example server serving one connection, as the examples
// do:
//
//   04 (write-to-persistent)    usage WRITE_DST|READ_SRC, no peer config;
//                               waits for the close, prints "New value"
//   05 (flush-to-persistent)    usage WRITE_DST|FLUSH_TYPE_VISIBILITY, plus
//                               FLUSH_TYPE_PERSISTENT on pmem; a peer config
//                               whose direct_write_to_pmem is set only on
//                               pmem with the argument "on"
//   07 (atomic-write)           struct log; usage WRITE_DST|READ_SRC and
//                               FLUSH_TYPE_PERSISTENT on pmem, else
//                               VISIBILITY; no peer config; prints the log
//   09 (flush-to-persistent-GPSPM)  usage WRITE_DST and PERSISTENT on pmem,
//                               else VISIBILITY; posts one receive before it
//                               accepts, answers one GPSPM_flush_request
//                               after persisting its range
//
// The region lives in a file mapped MAP_SHARED (-f), so that its bytes can
// be read after the run. Without --pmem it is what the example uses when
// given no <pmem-path>: the first 1024 bytes (1040 for 07's log), at
// data_offset 0 (07: 8). With --pmem it is what the example does with a
// <pmem-path> that libpmem2 maps as persistent memory: the whole file,
// data_offset 17 behind "RPMA_EXAMPLE_SIG" (07: its log at the file's
// start), and persists are msync. The guest has no persistent memory:
// --pmem replays the declarations, it does not make DRAM durable.
// Output is one KEY k=v line per event (README.md), besides the lines the
// examples themselves print; diagnostics go to stderr.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <librpma.h>

#define HELLO_STR_SIZE 1024        /* examples/common/common-hello.h */
#define SIGNATURE_STR "RPMA_EXAMPLE_SIG"
#define SIGNATURE_LEN (sizeof(SIGNATURE_STR)) /* strlen + 1 */
#define LOG_SIGNATURE "LOG"
#define LOG_SIGNATURE_SIZE 8
#define LOG_DATA_SIZE 1024
#define LOG_SIZE (LOG_SIGNATURE_SIZE + 8 + LOG_DATA_SIZE) /* struct log */
#define LOG_USED_OFFSET LOG_SIGNATURE_SIZE
#define LOG_DATA_OFFSET (LOG_SIGNATURE_SIZE + 8)
#define MSG_SIZE_MAX 512           /* flush-to-persistent-GPSPM.h */
#define SEND_OFFSET 0
#define RECV_OFFSET (SEND_OFFSET + MSG_SIZE_MAX)
#define RCQ_SIZE 1
#define DESCRIPTORS_MAX 24
#define COMMON_DATA_LEN (4 + DESCRIPTORS_MAX)
#define SHOW_MAX 4096

static const char *prog = "rpmaserver";

struct opts {
	const char *addr, *port, *file;
	int example; /* 4, 5, 7 or 9 */
	bool pmem, direct;
	int timeout_ms;
	bool verbose;
};

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

static char *hex_alloc(const void *p, size_t n)
{
	const uint8_t *b = p;
	char *out = malloc(2 * n + 2);
	if (out == NULL)
		return NULL;
	if (n == 0)
		return strcpy(out, "-");
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
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
		if (n == 0 || errno != EINTR)
			return 0;
	}
}

// The next completion of cq within timeout_ms: 0, or -1 on timeout or
// error (rpma_cq_wait alone would block for ever).
static int next_wc(struct rpma_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
	int fd, ret;
	int64_t end = now_ms() + timeout_ms;
	if (rpma_cq_get_fd(cq, &fd))
		return -1;
	for (;;) {
		ret = rpma_cq_get_wc(cq, 1, wc, NULL);
		if (ret == 0)
			return 0;
		if (ret != RPMA_E_NO_COMPLETION)
			return -1;
		int left = (int)(end - now_ms());
		if (left <= 0 || !wait_fd(fd, left)) {
			errf("no completion within %d ms", timeout_ms);
			return -1;
		}
		ret = rpma_cq_wait(cq);
		if (ret && ret != RPMA_E_NO_COMPLETION)
			return -1;
	}
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

// Decodes a GPSPM_flush_request as protobuf-c would: fields in any order,
// unknown fields skipped, the three required fixed64 fields present.
static int gpspm_request(const uint8_t *b, size_t n, uint64_t f[3])
{
	unsigned have = 0;
	size_t i = 0;
	while (i < n) {
		uint64_t key = 0, l = 0;
		int shift = 0;
		do {
			if (i >= n || shift > 28)
				return -1;
			key |= (uint64_t)(b[i] & 0x7f) << shift;
			shift += 7;
		} while (b[i++] & 0x80);
		unsigned wt = key & 7;
		uint64_t field = key >> 3;
		if (field >= 1 && field <= 3 && wt != 1)
			return -1;
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
			if (field >= 1 && field <= 3) {
				f[field - 1] = get_le64(b + i);
				have |= 1u << (field - 1);
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
	}
	return have == 7 ? 0 : -1;
}

struct region {
	uint8_t *map;
	size_t map_len;
	uint8_t *ptr;
	size_t size;
	unsigned data_offset;
};

// Maps the file and lays out the region as the example does.
static int map_region(const struct opts *o, struct region *r)
{
	int fd = open(o->file, O_RDWR | O_CREAT, 0644);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		errf("%s: %s", o->file, strerror(errno));
		return -1;
	}
	// A new (empty) file gets the size of a page, zeros.
	if (st.st_size == 0 && (ftruncate(fd, 4096) || fstat(fd, &st))) {
		errf("%s: %s", o->file, strerror(errno));
		close(fd);
		return -1;
	}
	size_t need = o->example == 7 ? LOG_SIZE : (o->pmem ? SIGNATURE_LEN : 0) + HELLO_STR_SIZE;
	if ((size_t)st.st_size < need) {
		errf("%s has too small size (%zu < %zu)", o->file, (size_t)st.st_size, need);
		close(fd);
		return -1;
	}
	r->map_len = (size_t)st.st_size;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r->map == MAP_FAILED) {
		errf("mmap %s: %s", o->file, strerror(errno));
		return -1;
	}
	r->ptr = r->map;
	if (o->example == 7) {
		// 07's server: with pmem the whole mapping, the log initialised
		// unless its signature is there; without, a fresh log.
		r->size = o->pmem ? r->map_len : LOG_SIZE;
		r->data_offset = LOG_USED_OFFSET;
		if (!o->pmem || strncmp((char *)r->ptr, LOG_SIGNATURE, LOG_SIGNATURE_SIZE)) {
			put_le64(r->ptr + LOG_USED_OFFSET, LOG_DATA_OFFSET);
			if (o->pmem) {
				memset(r->ptr, 0, LOG_SIGNATURE_SIZE);
				memcpy(r->ptr, LOG_SIGNATURE, sizeof(LOG_SIGNATURE));
			}
		}
	} else if (o->pmem) {
		// common_pmem_map_file_with_signature_check: the signature at
		// the start, the data behind it, an empty string if new.
		r->size = r->map_len;
		r->data_offset = SIGNATURE_LEN;
		if (memcmp(r->ptr, SIGNATURE_STR, SIGNATURE_LEN)) {
			r->ptr[SIGNATURE_LEN] = 0;
			memcpy(r->ptr, SIGNATURE_STR, SIGNATURE_LEN);
		}
	} else {
		r->size = HELLO_STR_SIZE;
		r->data_offset = 0;
	}
	if (o->pmem && msync(r->map, r->map_len, MS_SYNC)) {
		errf("msync: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int usage_of(const struct opts *o)
{
	switch (o->example) {
	case 4:
		return RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC;
	case 5:
		return RPMA_MR_USAGE_WRITE_DST | (o->pmem ? (RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT |
				RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY) : RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
	case 7:
		return RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
			(o->pmem ? RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT : RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
	}
	return RPMA_MR_USAGE_WRITE_DST |
		(o->pmem ? RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT : RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
}

// What the example prints of the region after the connection.
static void example_output(const struct opts *o, const struct region *r)
{
	if (o->example != 7) {
		const char *s = (const char *)r->ptr + r->data_offset;
		outf("New value: %.*s", (int)strnlen(s, r->size - r->data_offset), s);
		return;
	}
	uint64_t used = get_le64(r->ptr + LOG_USED_OFFSET);
	if (used > r->size)
		used = r->size;
	for (uint64_t i = LOG_DATA_OFFSET; i < used; i++)
		putchar(r->ptr[i] ? r->ptr[i] : '\n');
	fflush(stdout);
}

// Answers the one GPSPM request of 09's server: 0 once answered.
static int answer_gpspm(const struct opts *o, struct rpma_conn *conn, struct rpma_mr_local *msg_mr,
		uint8_t *msg, const struct region *r)
{
	struct rpma_cq *rcq = NULL, *cq = NULL;
	struct ibv_wc wc;
	uint64_t f[3] = { 0, 0, 0 };
	if (rpma_conn_get_rcq(conn, &rcq) || next_wc(rcq, &wc, o->timeout_ms))
		return -1;
	if (wc.status != IBV_WC_SUCCESS) {
		errf("rpma_recv() failed: %s", ibv_wc_status_str(wc.status));
		outf("GPSPM_REQUEST role=server status=%s", ibv_wc_status_str(wc.status));
		return -1;
	}
	if (wc.opcode != IBV_WC_RECV || gpspm_request(msg + RECV_OFFSET, wc.byte_len, f)) {
		errf("Cannot unpack the flush request buffer");
		outf("GPSPM_REQUEST role=server len=%u status=protocol", wc.byte_len);
		return -1;
	}
	outf("Flush request received: {offset: 0x%" PRIX64 ", length: 0x%" PRIX64 ", op_context: 0x%" PRIX64 "}",
		f[0], f[1], f[2]);
	bool inside = f[1] <= r->size && f[0] <= r->size - f[1];
	outf("GPSPM_REQUEST role=server len=%u offset=%" PRIu64 " length=%" PRIu64 " op_context=0x%" PRIx64
		" status=%s", wc.byte_len, f[0], f[1], f[2], inside ? "ok" : "range");
	if (!inside)
		return -1;
	if (o->pmem && f[1] > 0) {
		// mem.persist of the range: msync of the pages it touches.
		long page = sysconf(_SC_PAGESIZE);
		uintptr_t start = (uintptr_t)(r->ptr + f[0]) & ~(uintptr_t)(page - 1);
		if (msync((void *)start, (uintptr_t)(r->ptr + f[0] + f[1]) - start, MS_SYNC)) {
			errf("msync: %s", strerror(errno));
			return -1;
		}
	}
	msg[SEND_OFFSET] = 0x09; /* GPSPM_flush_response: 1: fixed64 op_context */
	put_le64(msg + SEND_OFFSET + 1, f[2]);
	if (rpma_send(conn, msg_mr, SEND_OFFSET, 9, RPMA_F_COMPLETION_ALWAYS, NULL) ||
			rpma_conn_get_cq(conn, &cq) || next_wc(cq, &wc, o->timeout_ms))
		return -1;
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND) {
		errf("rpma_send() failed: %s", ibv_wc_status_str(wc.status));
		return -1;
	}
	return 0;
}

static int run(const struct opts *o)
{
	struct region r;
	struct ibv_context *ctx = NULL;
	struct rpma_peer *peer = NULL;
	struct rpma_ep *ep = NULL;
	struct rpma_mr_local *mr = NULL, *msg_mr = NULL;
	struct rpma_peer_cfg *pcfg = NULL;
	struct rpma_conn_cfg *cfg = NULL;
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	uint8_t *msg = NULL;
	int ret, rc = 1, epfd;
	const char *why = "setup";

	if (map_region(o, &r))
		return 1;
	if (o->example != 7 && r.ptr[r.data_offset] != 0)
		outf("Old value: %.*s", (int)strnlen((char *)r.ptr + r.data_offset, r.size - r.data_offset),
			(char *)r.ptr + r.data_offset);
	int usage = usage_of(o);
	if ((ret = rpma_utils_get_ibv_context(o->addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx)) ||
			(ret = rpma_peer_new(ctx, &peer)) ||
			(ret = rpma_ep_listen(peer, o->addr, o->port, &ep)) ||
			(ret = rpma_mr_reg(peer, r.ptr, r.size, usage, &mr))) {
		errf("setting up on %s:%s: %s", o->addr, o->port, rpma_err_2str(ret));
		goto out;
	}
	uint8_t cd[COMMON_DATA_LEN] = { 0 };
	size_t mrs = 0, pcs = 0;
	if ((ret = rpma_mr_get_descriptor_size(mr, &mrs)) || mrs > DESCRIPTORS_MAX ||
			(ret = rpma_mr_get_descriptor(mr, cd + 4))) {
		errf("MR descriptor: %s", rpma_err_2str(ret));
		goto out;
	}
	cd[0] = (uint8_t)r.data_offset, cd[1] = (uint8_t)(r.data_offset >> 8);
	cd[2] = (uint8_t)mrs;
	if (o->example == 5) {
		// Only 05 sends its peer configuration; direct_write_to_pmem
		// only with pmem and "on" (an #ifdef USE_PMEM argument).
		if ((ret = rpma_peer_cfg_new(&pcfg)) ||
				(ret = rpma_peer_cfg_set_direct_write_to_pmem(pcfg, o->pmem && o->direct)) ||
				(ret = rpma_peer_cfg_get_descriptor_size(pcfg, &pcs)) || mrs + pcs > DESCRIPTORS_MAX ||
				(ret = rpma_peer_cfg_get_descriptor(pcfg, cd + 4 + mrs))) {
			errf("peer configuration: %s", rpma_err_2str(ret));
			goto out;
		}
		cd[3] = (uint8_t)pcs;
	}
	struct rpma_conn_private_data pd = { .ptr = cd, .len = sizeof(cd) };
	char *h = hex_alloc(cd, sizeof(cd));
	outf("LISTENING role=server example=%02d addr=%s port=%s region=%zu data_offset=%u usage=0x%02x "
		"pcfg_desc_size=%zu direct_write_to_pmem=%d private_data=%s", o->example, o->addr, o->port, r.size,
		r.data_offset, usage, pcs, o->example == 5 && o->pmem && o->direct, h ? h : "-");
	free(h);

	why = "accept";
	if ((ret = rpma_conn_cfg_new(&cfg)) || (ret = rpma_ep_get_fd(ep, &epfd)))
		goto out;
	if (o->example == 9) {
		void *p = NULL;
		if (posix_memalign(&p, 4096, HELLO_STR_SIZE) == 0)
			msg = p;
		if (msg == NULL || (ret = rpma_mr_reg(peer, msg, HELLO_STR_SIZE, RPMA_MR_USAGE_SEND |
				RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &msg_mr)) ||
				(ret = rpma_conn_cfg_set_rcq_size(cfg, RCQ_SIZE)))
			goto out;
	}
	if (!wait_fd(epfd, 120000)) {
		errf("no connection request within 120 s");
		goto out;
	}
	if ((ret = rpma_ep_next_conn_req(ep, o->example == 9 ? cfg : NULL, &req)) ||
			(o->example == 9 && (ret = rpma_conn_req_recv(req, msg_mr, RECV_OFFSET, MSG_SIZE_MAX, NULL))) ||
			(ret = rpma_conn_req_connect(&req, &pd, &conn)) ||
			(ret = next_conn_event(conn, o->timeout_ms, &ev)) || ev != RPMA_CONN_ESTABLISHED) {
		errf("accepting: %s, event %s", ret ? rpma_err_2str(ret) : "-", rpma_utils_conn_event_2str(ev));
		rpma_conn_req_delete(&req);
		goto out;
	}
	outf("ESTABLISHED role=server");
	why = "gpspm";
	if (o->example == 9 && answer_gpspm(o, conn, msg_mr, msg, &r))
		goto out;
	// common_wait_for_conn_close_and_disconnect.
	why = "close";
	if ((ret = next_conn_event(conn, o->timeout_ms, &ev)) || ev != RPMA_CONN_CLOSED) {
		errf("waiting for the close: %s, event %s", ret ? rpma_err_2str(ret) : "-",
			rpma_utils_conn_event_2str(ev));
		goto out;
	}
	rc = 0;
	why = "ok";
out:
	if (conn) {
		rpma_conn_disconnect(conn);
		rpma_conn_delete(&conn);
	}
	rpma_conn_cfg_delete(&cfg);
	rpma_peer_cfg_delete(&pcfg);
	rpma_mr_dereg(&msg_mr);
	rpma_mr_dereg(&mr);
	rpma_ep_shutdown(&ep);
	rpma_peer_delete(&peer);
	free(msg);
	if (rc == 0)
		example_output(o, &r);
	size_t show = r.size < SHOW_MAX ? r.size : SHOW_MAX;
	char *d = hex_alloc(r.ptr, show);
	outf("REGION role=server status=%s len=%zu data=%s", rc ? "error" : "ok", show, d ? d : "-");
	free(d);
	outf("RESULT role=server example=%02d status=%s", o->example, why);
	// The file holds the region's last state for whoever reads it next.
	msync(r.map, r.map_len, MS_SYNC);
	munmap(r.map, r.map_len);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s -a ADDR [-p PORT] -e 04|05|07|09 -f FILE [--pmem] [--direct-pmem-write]\n"
		"                  [-t SECONDS] [-v]\n"
		"Serves one connection as librpma 1.2's example server EX does, its region in FILE\n"
		"(created with 4096 zero bytes if missing or empty; at least 1041 bytes with --pmem,\n"
		"1024 without, 1040 for 07): --pmem replays the example given a <pmem-path>\n"
		"on persistent memory, --direct-pmem-write its \"on\" argument (05 only).\n",
		prog);
}

int main(int argc, char **argv)
{
	struct opts o = { .port = "7204", .timeout_ms = 30000 };
	static const struct option longs[] = {
		{ "pmem", no_argument, NULL, 'P' },
		{ "direct-pmem-write", no_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "a:p:e:f:t:vh", longs, NULL)) != -1) {
		switch (c) {
		case 'a': o.addr = optarg; break;
		case 'p': o.port = optarg; break;
		case 'e': o.example = atoi(optarg); break;
		case 'f': o.file = optarg; break;
		case 't': o.timeout_ms = atoi(optarg) * 1000; break;
		case 'v': o.verbose = true; break;
		case 'P': o.pmem = true; break;
		case 'D': o.direct = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (o.addr == NULL || o.file == NULL || o.timeout_ms <= 0 || optind != argc ||
			(o.example != 4 && o.example != 5 && o.example != 7 && o.example != 9)) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rpma_log_set_function(log_fn);
	rpma_log_set_threshold(RPMA_LOG_THRESHOLD, o.verbose ? RPMA_LOG_LEVEL_INFO : RPMA_LOG_LEVEL_WARNING);
	return run(&o);
}
