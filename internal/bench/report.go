package bench

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// After its measured part, the client asks the server of each session for
// a report — what the server's end of the connection received and how
// much CPU its process spent — with a zero-length Send carrying the
// Solicited Event flag. No measured message is ever like that: stream
// Sends carry at least one byte, and the zero-length Send that announces a
// Write in a latency session is unsolicited. The server answers with a
// Send of the report.

const (
	reportMagic = "iwpr"
	reportLen   = 40
)

// Report is the server's account of one session.
type Report struct {
	// CRC: the connection negotiated the MPA CRC, so the server's end
	// checked it on every FPDU it received.
	CRC bool
	// FPDUs received by the server's end and those whose CRC did not check
	// (conn.QP.Stats), the report request included.
	FPDUs, CRCErrors uint64
	// CPU is the server process's CPU time (user and system) from the
	// session's first message to the report request, if the server's
	// system measures it (CPUKnown); RoundTrips the latency session's
	// messages the server answered meanwhile.
	CPU        time.Duration
	CPUKnown   bool
	RoundTrips uint64
}

const (
	reportCRC = 1 << iota
	reportCPU
)

// AppendReport appends the 40-byte encoding of r.
func AppendReport(b []byte, r Report) []byte {
	b = append(b, reportMagic...)
	flags := byte(0)
	if r.CRC {
		flags |= reportCRC
	}
	cpu := uint64(0)
	if r.CPUKnown {
		flags |= reportCPU
		cpu = uint64(max(r.CPU, 0))
	}
	b = append(b, flags, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, r.FPDUs)
	b = binary.BigEndian.AppendUint64(b, r.CRCErrors)
	b = binary.BigEndian.AppendUint64(b, cpu)
	return binary.BigEndian.AppendUint64(b, r.RoundTrips)
}

// ParseReport decodes a server's report.
func ParseReport(b []byte) (Report, error) {
	if len(b) != reportLen || string(b[:4]) != reportMagic {
		return Report{}, fmt.Errorf("the server's answer is not a bench report (%d bytes)", len(b))
	}
	flags := b[4]
	if flags&^(reportCRC|reportCPU) != 0 || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return Report{}, fmt.Errorf("bench report flags %#x %x", flags, b[5:8])
	}
	cpu := binary.BigEndian.Uint64(b[24:32])
	if cpu > 1<<63-1 || (flags&reportCPU == 0 && cpu != 0) {
		return Report{}, fmt.Errorf("bench report CPU time %d", cpu)
	}
	return Report{
		CRC:        flags&reportCRC != 0,
		FPDUs:      binary.BigEndian.Uint64(b[8:16]),
		CRCErrors:  binary.BigEndian.Uint64(b[16:24]),
		CPU:        time.Duration(cpu),
		CPUKnown:   flags&reportCPU != 0,
		RoundTrips: binary.BigEndian.Uint64(b[32:40]),
	}, nil
}

// isReportRequest reports whether a receive completion is the client's
// request for a report.
func isReportRequest(wc *conn.WorkCompletion) bool {
	return wc.Op == conn.WCRecv && wc.ByteLen == 0 && wc.Flags&conn.WCSolicited != 0
}

// received is what one end of a connection received: its FPDUs, the
// CRC errors among them, and whether the CRC was negotiated.
type received struct {
	crc              bool
	fpdus, crcErrors uint64
}

func receivedBy(qp *conn.QP) received {
	st := qp.Stats()
	_, rx := st.FPDUs()
	n := qp.Negotiated()
	return received{crc: n != nil && n.CRC, fpdus: rx, crcErrors: st.CRCErrors}
}

// crcCount adds up what the ends of a run's connections received: the
// FPDUs, those of them that were CRC-checked (all of a connection's, if it
// negotiated the CRC) and the CRC errors.
type crcCount struct {
	fpdus, checked, errors uint64
}

func (c *crcCount) add(r received) {
	c.fpdus += r.fpdus
	c.errors += r.crcErrors
	if r.crc {
		c.checked += r.fpdus
	}
}

func (c *crcCount) addReport(r Report) {
	c.add(received{crc: r.CRC, fpdus: r.FPDUs, crcErrors: r.CRCErrors})
}

// describe says in words whether the CRC was checked on every FPDU.
func (c *crcCount) describe() string {
	switch {
	case c.fpdus == 0:
		return "no FPDUs counted"
	case c.checked == c.fpdus:
		return fmt.Sprintf("CRC checked on every FPDU received (%d, both ends), %d CRC errors", c.fpdus, c.errors)
	case c.checked == 0:
		return fmt.Sprintf("CRC not checked (%d FPDUs received, both ends)", c.fpdus)
	}
	return fmt.Sprintf("CRC checked on %d of %d FPDUs received (both ends), %d CRC errors", c.checked, c.fpdus, c.errors)
}
