// Package connflags turns iwarp-peer's connection flags into conn
// options: the MPA variants of the commands that interoperate with other
// iWARP stacks (--crc, --mpa-rev, --no-enhanced, --p2p) and the servers'
// limits (--max-conns, --max-handshakes, --idle-timeout). A command
// registers a group on its flag set, and after parsing asks it for the
// options; the errors name the flag at fault, for the command to print.
package connflags
