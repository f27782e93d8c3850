package testimages

import (
	"net"
	"net/netip"
	"testing"
)

func TestFreePodCIDR(t *testing.T) {
	for _, r := range []struct{ lo, hi int }{{50, 249}, {200, 250}, {7, 7}} {
		for range 20 {
			p := FreePodCIDR(t, r.lo, r.hi)
			b := p.Addr().As4()
			if p.Bits() != 24 || b[0] != 10 || int(b[1]) < r.lo || int(b[1]) > r.hi || b[3] != 0 {
				t.Fatalf("FreePodCIDR(%d, %d) = %s, want 10.x.y.0/24 with x in %d..%d", r.lo, r.hi, p, r.lo, r.hi)
			}
			addrs, _ := net.InterfaceAddrs()
			for _, a := range addrs {
				if q, err := netip.ParsePrefix(a.String()); err == nil && q.Masked().Overlaps(p) {
					t.Fatalf("FreePodCIDR = %s overlaps the address %s of this machine", p, a)
				}
			}
		}
	}
}
