package lab

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// SiwVariant names one of the two siw.ko builds in the guest.
type SiwVariant string

const (
	// SiwStock is Debian's siw source built unchanged: no module
	// parameters (CRC not required, not strict, no peer-to-peer, MPA rev 2).
	SiwStock SiwVariant = "stock"
	// SiwKnobs is the same source with its compile-time settings
	// (mpa_crc_required, mpa_crc_strict, peer_to_peer, mpa_version,
	// try_gso, siw_tcp_nagle) turned into module parameters with unchanged
	// defaults.
	SiwKnobs SiwVariant = "knobs"
)

// KnobsModule is the guest path of the parameterised siw.ko.
const KnobsModule = "/lib/modules/siw-knobs/siw.ko"

var paramRe = regexp.MustCompile(`^([a-z_]+)=([A-Za-z0-9]+)$`)

// CheckSiwParam reports whether p has the form LoadSiw accepts for a module
// parameter of the knobs build: name=value, a lower-case name and a value
// of letters and digits. Whether the module has that parameter only
// loading it tells (see Config.SiwKnobs for the list build.sh recorded).
func CheckSiwParam(p string) error {
	if !paramRe.MatchString(p) {
		return fmt.Errorf("lab: bad module parameter %q: want name=value", p)
	}
	return nil
}

// LoadSiw replaces the loaded siw module: it deletes the siw0 link,
// unloads siw, loads the variant with params ("name=value", knobs only),
// adds siw0 on eth0 again and checks that the parameters took effect. No
// RDMA application may be running in the guest.
func (g *Guest) LoadSiw(ctx context.Context, v SiwVariant, params ...string) error {
	var load string
	switch v {
	case SiwStock:
		if len(params) > 0 {
			return fmt.Errorf("lab: the stock siw has no module parameters")
		}
		load = "modprobe siw"
	case SiwKnobs:
		for _, p := range params {
			if err := CheckSiwParam(p); err != nil {
				return err
			}
		}
		load = "insmod " + KnobsModule + " " + strings.Join(params, " ")
	default:
		return fmt.Errorf("lab: unknown siw variant %q", v)
	}
	script := `set -e
if [ -e /sys/class/infiniband/siw0 ]; then rdma link delete siw0; fi
if [ -d /sys/module/siw ]; then rmmod siw; fi
` + load + `
rdma link add siw0 type siw netdev eth0
for f in /sys/module/siw/parameters/*; do [ -e "$f" ] && echo "$(basename "$f")=$(cat "$f")"; done
true`
	res, err := g.Run(ctx, 60*time.Second, "load-siw-"+string(v), script)
	if err != nil {
		return err
	}
	if !res.OK() {
		return fmt.Errorf("lab: loading siw (%s) failed: %s", v, res)
	}
	got := parseParams(res.Stdout)
	if v == SiwStock && len(got) > 0 {
		return fmt.Errorf("lab: stock siw unexpectedly has parameters %v", got)
	}
	for _, p := range params {
		m := paramRe.FindStringSubmatch(p)
		if want, have := normParam(m[1], m[2]), got[m[1]]; want != have {
			return fmt.Errorf("lab: siw parameter %s is %q after loading, want %q", m[1], have, want)
		}
	}
	return nil
}

func parseParams(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			m[k] = v
		}
	}
	return m
}

// normParam maps what insmod accepts for a parameter to what sysfs shows:
// booleans read back as Y or N, the byte mpa_version as a decimal number.
func normParam(name, v string) string {
	if name == "mpa_version" {
		return v
	}
	switch strings.ToLower(v) {
	case "1", "y", "true", "on":
		return "Y"
	case "0", "n", "false", "off":
		return "N"
	}
	return v
}
