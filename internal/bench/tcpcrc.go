package bench

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
)

// The raw TCP + CRC baseline: the fair limit for a CRC row, which pays
// for CRC32c on both ends where the plain baseline pays nothing. It is
// the plain baseline's transfer, unchanged (one system call per message,
// io.ReadFull through the same buffered reader), plus the CRC work MPA
// does on the same bytes: the sender computes CRC32c (Castagnoli,
// hash/crc32) over each crcPiece of the message, an FPDU's payload rounded
// up, and sends the sums behind the message in the same writev (4 bytes
// per piece, as MPA's trailer); the receiver computes them over what it
// read and checks them against the sender's.

const crcPiece = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBaselineCRC: a piece of the baseline stream did not check.
var errBaselineCRC = errors.New("raw TCP baseline: CRC32c mismatch")

func crcPieces(n int) int { return (n + crcPiece - 1) / crcPiece }

// sumPieces puts the CRC32c of each piece of data into sums.
func sumPieces(data, sums []byte) {
	for i := 0; i*crcPiece < len(data); i++ {
		p := data[i*crcPiece : min((i+1)*crcPiece, len(data))]
		binary.BigEndian.PutUint32(sums[4*i:], crc32.Checksum(p, castagnoli))
	}
}

// crcSender writes one message again and again, each time computing its
// sums.
type crcSender struct {
	msg, data []byte // what is written; the part of it the sums cover
	sums      []byte
	iov       net.Buffers // room for the two buffers of a writev
	work      net.Buffers // what writev consumes (WriteTo moves it past what it wrote)
}

// newCRCSender sends msg, whose sums cover msg[skip:] (a length prefix
// before is not covered).
func newCRCSender(msg []byte, skip int) *crcSender {
	data := msg[skip:]
	return &crcSender{msg: msg, data: data, sums: make([]byte, 4*crcPieces(len(data))), iov: make(net.Buffers, 0, 2)}
}

// write computes the sums and writes the message with them.
func (s *crcSender) write(w io.Writer) error {
	sumPieces(s.data, s.sums)
	s.work = append(s.iov[:0], s.msg, s.sums)
	_, err := s.work.WriteTo(w)
	return err
}

// crcReceiver reads messages sent by crcSender.
type crcReceiver struct {
	r          io.Reader
	sums, want []byte
}

// newCRCReceiver reads messages of up to size bytes from r.
func newCRCReceiver(r io.Reader, size int) *crcReceiver {
	n := 4 * crcPieces(size)
	return &crcReceiver{r: r, sums: make([]byte, n), want: make([]byte, n)}
}

// read reads a message of len(buf) bytes and its sums and checks them:
// io.EOF if the stream ends before the message starts.
func (c *crcReceiver) read(buf []byte) error {
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return err
	}
	n := 4 * crcPieces(len(buf))
	sumPieces(buf, c.sums[:n])
	if _, err := io.ReadFull(c.r, c.want[:n]); err != nil {
		return noEOF(err)
	}
	if string(c.sums[:n]) != string(c.want[:n]) {
		return errBaselineCRC
	}
	return nil
}

// noEOF turns an end of stream inside a message into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
