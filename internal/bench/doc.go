// Package bench measures bandwidth and latency between two iwarp-go peers,
// and the same transfers over a raw Go TCP connection for comparison.
//
// A run is a series of sessions, one connection each: a bandwidth phase (a
// stream of RDMA Writes, RDMA Reads or Sends, a window of them in flight)
// and a latency phase (ping-pong, one round trip at a time). The client
// describes each session in its MPA Request's private data (Session,
// AppendSession, ParseSession) and the server answers with its region in
// the Reply's (Region, AppendReply, ParseReply), so nothing is spent on
// set-up on the measured connection. Run is the client, Serve the server.
package bench
