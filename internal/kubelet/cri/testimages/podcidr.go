package testimages

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// FreePodCIDR picks a random 10.x.y.0/24, x in lo..hi, that overlaps no
// address or route of this machine, for the pods of a runtime a test
// starts. Callers that may run side by side on one machine pick ranges
// of their own.
func FreePodCIDR(t testing.TB, lo, hi int) netip.Prefix {
	t.Helper()
	if lo < 0 || hi > 255 || lo > hi {
		t.Fatalf("FreePodCIDR: x range %d..%d is not within 0..255", lo, hi)
	}
	var used []netip.Prefix
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			used = append(used, p.Masked())
		}
	}
	if out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			dst := f[0]
			if dst == "local" || dst == "broadcast" || dst == "unicast" {
				if len(f) < 2 {
					continue
				}
				dst = f[1]
			}
			if dst == "default" {
				continue
			}
			if !strings.Contains(dst, "/") {
				dst += "/32"
			}
			if p, err := netip.ParsePrefix(dst); err == nil {
				used = append(used, p)
			}
		}
	}
	for range 100 {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(hi-lo+1)*256))
		if err != nil {
			t.Fatal(err)
		}
		x := n.Int64()
		p := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", int64(lo)+x/256, x%256))
		free := true
		for _, u := range used {
			if u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p
		}
	}
	t.Fatalf("no free 10.x.y.0/24 (x in %d..%d) for pods", lo, hi)
	return netip.Prefix{}
}
