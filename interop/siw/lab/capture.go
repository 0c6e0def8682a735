package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// Capture is a tcpdump running in the guest, writing into the share.
type Capture struct {
	p    *Proc
	name string
	host string
}

var filterRe = regexp.MustCompile(`^[A-Za-z0-9 .:=<>!()&|-]*$`)

// StartCapture starts tcpdump on the guest interface iface (eth0 for
// guest↔host traffic; lo for siw↔siw traffic inside the guest, including
// connections to 10.0.2.15, which Linux routes over lo; any for both) with
// an optional BPF filter, writing /mnt/out/<name>.pcap. snaplen limits the
// bytes kept per packet (0: whole packets, which tshark needs to reassemble
// MPA). It returns once tcpdump reports that it is listening, so packets
// sent afterwards are in the capture.
func (g *Guest) StartCapture(ctx context.Context, name, iface, filter string, snaplen int) (*Capture, error) {
	name = sanitize(name)
	if iface == "" || !filterRe.MatchString(iface) || !filterRe.MatchString(filter) {
		return nil, fmt.Errorf("capture %s: bad interface %q or filter %q", name, iface, filter)
	}
	guestPath := GuestShare + "/" + outDir + "/" + name + ".pcap"
	if snaplen < 0 {
		return nil, fmt.Errorf("capture %s: negative snaplen", name)
	}
	// A 32 MiB kernel buffer: tcpdump writes every packet through 9p at
	// once (-U), which under TCG can fall behind a burst.
	script := fmt.Sprintf("exec tcpdump -i %s -n -U --immediate-mode -B 32768 -s %d -Z root -w %s %s", iface, snaplen, guestPath, filter)
	p, err := g.Start(ctx, "tcpdump-"+name, script, 0)
	if err != nil {
		return nil, err
	}
	c := &Capture{p: p, name: name, host: filepath.Join(g.share, outDir, name+".pcap")}
	g.keep(c.host)
	if err := p.WaitOutput(ctx, 30*time.Second, "listening on"); err != nil {
		_, _ = p.Stop(ctx, time.Second)
		return nil, err
	}
	return c, nil
}

// Path returns the host path of the capture file.
func (c *Capture) Path() string { return c.host }

// Stop ends tcpdump (after a short pause, so the last packets are written)
// and returns the host path of the pcap file.
func (c *Capture) Stop(ctx context.Context) (string, error) {
	time.Sleep(300 * time.Millisecond)
	if !c.p.Exited() {
		if err := c.p.Signal(syscall.SIGINT); err != nil {
			return "", err
		}
	}
	r, err := c.p.Wait(ctx, 15*time.Second)
	if err != nil {
		r, err = c.p.Stop(ctx, time.Second)
		if err != nil {
			return "", err
		}
	}
	if r.Code != 0 && r.Signal == "" {
		return "", fmt.Errorf("capture %s: tcpdump failed: %s", c.name, r)
	}
	st, err := os.Stat(c.host)
	if err != nil {
		return "", fmt.Errorf("capture %s: %w", c.name, err)
	}
	if st.Size() <= 24 { // a pcap file header alone
		return c.host, fmt.Errorf("capture %s: no packets captured", c.name)
	}
	switch n := droppedPackets(r.Stderr); {
	case n < 0:
		return c.host, fmt.Errorf("capture %s: tcpdump printed no statistics; the capture may be incomplete", c.name)
	case n > 0:
		return c.host, fmt.Errorf("capture %s: %d packets dropped by the kernel; the capture is incomplete", c.name, n)
	}
	return c.host, nil
}

var droppedRe = regexp.MustCompile(`(?m)^(\d+) packets? dropped by kernel`)

// droppedPackets reads tcpdump's closing statistics; -1 if they are missing.
func droppedPackets(stderr string) int {
	m := droppedRe.FindStringSubmatch(stderr)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}
