package perftest

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The text perftest prints, reproduced so that a run's output can be put
// beside a perftest program's (perftest_parameters.h's RESULT_* and
// REPORT_* formats, ctx_print_test_info, ctx_print_pingpong_data).

const resultLine = "---------------------------------------------------------------------------------------\n"

// header describes this side for the test information block.
type header struct {
	test        Test
	role        Role
	qps         int
	txDepth     int
	rxDepth     int
	cqMod       int
	mtu         int // bytes
	outReads    int
	duration    bool
	reportGbits bool
}

// writeWaiting is the banner a server prints before the comm connection.
func writeWaiting(w io.Writer) {
	fmt.Fprint(w, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
}

// writeInfo is ctx_print_test_info, for a device called iwarp-go.
func writeInfo(w io.Writer, h *header) {
	var b strings.Builder
	b.WriteString(resultLine)
	kind := "BW "
	if h.test.Latency() {
		kind = "Latency "
	}
	fmt.Fprintf(&b, "                    %s %sTest\n", h.test.verb().name(), kind)
	fmt.Fprintf(&b, " Dual-port       : OFF\t\tDevice         : iwarp-go\n")
	fmt.Fprintf(&b, " Number of qps   : %d\t\tTransport type : IW\n", h.qps)
	fmt.Fprintf(&b, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	fmt.Fprintf(&b, " PCIe relax order: Unsupported\n")
	fmt.Fprintf(&b, " ibv_wr* API     : OFF\n")
	if h.role == Client {
		fmt.Fprintf(&b, " TX depth        : %d\n", h.txDepth)
	}
	if h.test.verb() == verbSend && h.role == Server {
		fmt.Fprintf(&b, " RX depth        : %d\n", h.rxDepth)
	}
	if !h.test.Latency() {
		fmt.Fprintf(&b, " CQ Moderation   : %d\n", h.cqMod)
	}
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", h.mtu)
	fmt.Fprintf(&b, " Link type       : Ethernet\n")
	if h.test.verb().oneSidedRead() {
		fmt.Fprintf(&b, " Outstand reads  : %d\n", h.outReads)
	} else {
		fmt.Fprintf(&b, " Max inline data : 0[B]\n")
	}
	fmt.Fprintf(&b, " rdma_cm QPs\t : ON\n")
	fmt.Fprintf(&b, " Data ex. method : rdma_cm")
	if h.role == Server {
		b.WriteString("\n" + resultLine)
		b.WriteString(" Waiting for client rdma_cm QP to connect\n")
		b.WriteString(" Please run the same command with the IB/RoCE interface IP")
	}
	b.WriteString("\n" + resultLine)
	io.WriteString(w, b.String())
}

// writeDest is ctx_print_pingpong_data as perftest prints it with rdma_cm
// (the comm connection's verb is Send, so no RKey or VAddr).
func writeDest(w io.Writer, side string, d *Dest) {
	fmt.Fprintf(w, " %s address: LID %s QPN %s PSN %s\n", side, cHex(d.LID, 4), cHex(d.QPN, 6), cHex(d.PSN, 6))
}

// cHex formats v as C's printf("%#0*x", width): "0x"-prefixed and zero
// padded to width characters, except that zero is printed as width
// zeros without a prefix.
func cHex(v uint32, width int) string {
	if v == 0 {
		return strings.Repeat("0", width)
	}
	s := strconv.FormatUint(uint64(v), 16)
	if n := width - 2 - len(s); n > 0 {
		s = strings.Repeat("0", n) + s
	}
	return "0x" + s
}

// writeResultHeader prints the line and the column names of the table.
func writeResultHeader(w io.Writer, test Test, duration, gbits bool) {
	switch {
	case !test.Latency() && gbits:
		io.WriteString(w, resultLine+" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n")
	case !test.Latency():
		io.WriteString(w, resultLine+" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n")
	case duration:
		io.WriteString(w, resultLine+" #bytes        #iterations       t_avg[usec]    tps average\n")
	default:
		io.WriteString(w, resultLine+" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n")
	}
}

// writeBWRow is print_full_bw_report: REPORT_FMT, or REPORT_FMT_EXT with
// six decimals when a Gb/s average is below 0.1.
func writeBWRow(w io.Writer, r *BWReport, gbits bool) {
	if gbits && r.BWAvg < 0.1 {
		fmt.Fprintf(w, " %-7d    %d           %-7s            %-7s            %-7s\n", r.Size, r.Iters,
			cFloat(r.BWPeak, 6), cFloat(r.BWAvg, 6), cFloat(r.MsgRate, 6))
		return
	}
	fmt.Fprintf(w, " %-7d    %-10d       %-7s            %-7s\t\t   %-7s\n", r.Size, r.Iters,
		cFloat(r.BWPeak, 2), cFloat(r.BWAvg, 2), cFloat(r.MsgRate, 6))
}

// writeLatRow is print_report_lat's REPORT_FMT_LAT, or
// REPORT_FMT_LAT_DUR for a duration run.
func writeLatRow(w io.Writer, r *LatReport) {
	if r.Duration {
		fmt.Fprintf(w, " %-7d       %d            %-7s        %-7s\n", r.Size, r.Iters, cFloat(r.TAvg, 2), cFloat(r.TPS, 2))
		return
	}
	fmt.Fprintf(w, " %-7d %d          %-7s        %-7s      %-7s  \t       %-7s     \t%-7s\t\t%-7s \t\t%-7s\n",
		r.Size, r.Iters, cFloat(r.TMin, 2), cFloat(r.TMax, 2), cFloat(r.TTypical, 2), cFloat(r.TAvg, 2),
		cFloat(r.TStdev, 2), cFloat(r.P99, 2), cFloat(r.P999, 2))
}

// cFloat formats like C's %.Nf, which prints inf and nan (glibc: "-nan"
// for a negative NaN) where Go prints +Inf and NaN.
func cFloat(v float64, prec int) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		if math.Signbit(v) {
			return "-nan"
		}
		return "nan"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
