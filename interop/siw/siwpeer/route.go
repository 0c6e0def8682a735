package siwpeer

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

func defaultRouteIn(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags ...; RTF_UP is flag 1.
		if len(f) >= 4 && f[1] == "00000000" && f[0] != "Iface" && f[3] != "0000" {
			return f[0], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no IPv4 default route")
}
