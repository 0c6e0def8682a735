package perftest

// send_bw over iWARP paces the sender with credits (ctx.send_rcredit,
// set for IBV_TRANSPORT_IWARP): a Send that finds no posted receive is a
// fatal error in iWARP. Each side registers a credit word per queue pair
// and names it in its handshakes. The receiver, after every rx_depth/3
// receives (counted within rx_depth), RDMA-Writes its count of receives
// as a 4-byte host-order (little-endian) integer into the sender's word;
// the sender keeps fewer than rx_depth messages beyond the last credit.

// creditEvery is the receiver's interval: rx_depth/3 (ctx->credit_cnt).
func creditEvery(rxDepth int) uint64 { return uint64(max(1, rxDepth/3)) }

// creditDue reports whether the receiver writes a credit after its rcnt-th
// receive (run_iter_bw_server).
func creditDue(rcnt uint64, rxDepth int) bool {
	return rcnt%uint64(rxDepth)%creditEvery(rxDepth) == 0
}

// windowOpen reports whether the sender, having posted scnt messages, may
// post the next one given the receiver's last credit (run_iter_bw). A
// credit larger than scnt can only be the previous size's last one under
// -a, which the sender has not yet seen reset; it counts as none.
func windowOpen(scnt uint64, credit uint32, rxDepth int) bool {
	c := uint64(credit)
	if c > scnt {
		c = 0
	}
	return scnt+1-c < uint64(rxDepth)
}
