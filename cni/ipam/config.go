// Package ipam allocates pod addresses per network, whereabouts-compatible in meaning: each
// network has one or more IPv4 ranges (a CIDR, optionally narrowed by range_start and
// range_end, with exclusions); an ADD takes the lowest free address, first range first; the
// same range can serve several networks, each with its own allocations; and every allocation
// lives in etcd under the network, keyed by address and by attachment (container id and
// interface), claimed in one transaction, so two nodes allocating at once never hand out the
// same address. DEL releases it, GC releases those of attachments that no longer exist.
//
// IPv4 only, as the dataplane is.
package ipam

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// Range is one block of addresses a network hands out.
type Range struct {
	// Prefix is the subnet (what the pod's address is given with, e.g. 10.1.0.0/16).
	Prefix netip.Prefix
	// First and Last bound the addresses handed out, both included. Without range_start and
	// range_end they are the subnet's first and last host addresses (its network and
	// broadcast addresses are never handed out, nor, in a /31 or /32, anything at all).
	First, Last netip.Addr
	// Exclude lists prefixes (single addresses as /32) never handed out; the gateway is
	// always among them.
	Exclude []netip.Prefix
	// Gateway, if set, is the pod's gateway in this range.
	Gateway netip.Addr
}

// Config is a network's IPAM configuration, as the CNI plugin's `ipam` object carries it.
type Config struct {
	// Network names the allocation space (whereabouts' network_name): two networks with the
	// same range allocate independently.
	Network string
	Ranges  []Range
}

// rawRange is one range in JSON, as whereabouts spells it.
type rawRange struct {
	Range      string   `json:"range"`
	RangeStart string   `json:"range_start,omitempty"`
	RangeEnd   string   `json:"range_end,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
	Gateway    string   `json:"gateway,omitempty"`
}

type rawConfig struct {
	rawRange
	NetworkName string     `json:"network_name"`
	IPRanges    []rawRange `json:"ipRanges,omitempty"`
}

// ParseConfig reads an `ipam` object: `network_name` and either a top-level range
// (`range`, `range_start`, `range_end`, `exclude`, `gateway`) or `ipRanges`, a list of
// such ranges (or both: the top-level one comes first). `range` is a CIDR, or whereabouts'
// `FIRST-LAST/LEN` form. Every mistake is reported with the field it is in.
func ParseConfig(data []byte) (*Config, error) {
	var raw rawConfig
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("ipam configuration: %w", err)
	}
	if raw.NetworkName == "" {
		return nil, fmt.Errorf("ipam configuration: network_name is missing")
	}
	if strings.ContainsAny(raw.NetworkName, "/ \t\n") {
		return nil, fmt.Errorf("ipam configuration: network_name %q may not contain '/' or spaces", raw.NetworkName)
	}
	c := &Config{Network: raw.NetworkName}
	all := raw.IPRanges
	if raw.Range != "" {
		all = append([]rawRange{raw.rawRange}, all...)
	} else if raw.RangeStart != "" || raw.RangeEnd != "" || len(raw.Exclude) > 0 || raw.Gateway != "" {
		return nil, fmt.Errorf("ipam configuration: range_start, range_end, exclude or gateway without a range")
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("ipam configuration: no range (set range or ipRanges)")
	}
	for i, r := range all {
		rg, err := parseRange(r)
		if err != nil {
			return nil, fmt.Errorf("ipam configuration: range %d (%s): %w", i, r.Range, err)
		}
		for j, o := range c.Ranges {
			if overlaps(rg, o) {
				return nil, fmt.Errorf("ipam configuration: range %d (%s) overlaps range %d (%s)", i, r.Range, j, o.Prefix)
			}
		}
		c.Ranges = append(c.Ranges, rg)
	}
	return c, nil
}

func parseRange(r rawRange) (Range, error) {
	var rg Range
	spec := r.Range
	var first, last netip.Addr
	if dash := strings.IndexByte(spec, '-'); dash >= 0 {
		// FIRST-LAST/LEN
		slash := strings.IndexByte(spec, '/')
		if slash < dash {
			return rg, fmt.Errorf("expected a CIDR or FIRST-LAST/LEN")
		}
		var err error
		if first, err = parse4(spec[:dash]); err != nil {
			return rg, err
		}
		if last, err = parse4(spec[dash+1 : slash]); err != nil {
			return rg, err
		}
		spec = first.String() + spec[slash:]
	}
	p, err := netip.ParsePrefix(spec)
	if err != nil || !p.Addr().Is4() {
		return rg, fmt.Errorf("not an IPv4 CIDR")
	}
	rg.Prefix = p
	base := p.Masked().Addr()
	bits := p.Bits()
	if bits >= 31 {
		return rg, fmt.Errorf("a /%d has no host addresses to hand out", bits)
	}
	hostFirst := base.Next()
	hostLast := broadcast(p).Prev()
	rg.First, rg.Last = hostFirst, hostLast
	if first.IsValid() {
		rg.First, rg.Last = first, last
	}
	for _, f := range []struct {
		name string
		val  string
		to   *netip.Addr
	}{{"range_start", r.RangeStart, &rg.First}, {"range_end", r.RangeEnd, &rg.Last}} {
		if f.val == "" {
			continue
		}
		a, err := parse4(f.val)
		if err != nil {
			return rg, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.to = a
	}
	for _, f := range []struct {
		name string
		a    netip.Addr
	}{{"range_start", rg.First}, {"range_end", rg.Last}} {
		if !p.Contains(f.a) {
			return rg, fmt.Errorf("%s %s is outside %s", f.name, f.a, p.Masked())
		}
	}
	// Never the subnet's network or broadcast address, whatever range_start and range_end say.
	if rg.First.Less(hostFirst) {
		rg.First = hostFirst
	}
	if hostLast.Less(rg.Last) {
		rg.Last = hostLast
	}
	if rg.Last.Less(rg.First) {
		return rg, fmt.Errorf("range_start %s is after range_end %s", rg.First, rg.Last)
	}
	for _, e := range r.Exclude {
		var x netip.Prefix
		if strings.Contains(e, "/") {
			x, err = netip.ParsePrefix(e)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(e)
			x = netip.PrefixFrom(a, 32)
		}
		if err != nil || !x.Addr().Is4() {
			return rg, fmt.Errorf("exclude %q: not an IPv4 address or CIDR", e)
		}
		rg.Exclude = append(rg.Exclude, x.Masked())
	}
	if r.Gateway != "" {
		g, err := parse4(r.Gateway)
		if err != nil {
			return rg, fmt.Errorf("gateway: %w", err)
		}
		if !p.Contains(g) {
			return rg, fmt.Errorf("gateway %s is outside %s", g, p.Masked())
		}
		rg.Gateway = g
		rg.Exclude = append(rg.Exclude, netip.PrefixFrom(g, 32))
	}
	return rg, nil
}

func parse4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 address", s)
	}
	return a, nil
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func broadcast(p netip.Prefix) netip.Addr {
	return addr(u32(p.Masked().Addr()) | (1<<(32-p.Bits()) - 1))
}

func overlaps(a, b Range) bool {
	return u32(a.First) <= u32(b.Last) && u32(b.First) <= u32(a.Last)
}

// excluded reports whether a is in one of the range's exclusions.
func (r *Range) excluded(a netip.Addr) bool {
	for _, x := range r.Exclude {
		if x.Contains(a) {
			return true
		}
	}
	return false
}

// Size is how many addresses the range can hand out (exclusions not subtracted).
func (r *Range) Size() uint64 {
	return uint64(u32(r.Last)-u32(r.First)) + 1
}
