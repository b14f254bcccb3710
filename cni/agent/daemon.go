package agent

import (
	"net/netip"

	"veclane.dev/cni/ctl"
)

// Daemon is a connection to a veclane daemon's control API (package ctl's client), with the
// agent's view of it: its own routes, and State.
type Daemon struct{ *ctl.Client }

// DialDaemon connects to the control socket at path.
func DialDaemon(path string) (*Daemon, error) {
	c, err := ctl.Dial(path)
	if err != nil {
		return nil, err
	}
	return &Daemon{c}, nil
}

// Owner is what the agent marks the networks it creates with (`network add ... owner`): it
// manages those, and leaves every other network of the daemon alone.
const Owner = "veclane-agent"

// NetworkAdd creates a network with its VRF, marked as the agent's.
func (d *Daemon) NetworkAdd(n *NetworkState) error {
	return d.Do(ctl.NetworkAdd{Name: n.Name, VNI: n.VNI, Ranges: n.Ranges, Uplink: n.Uplink, Owner: Owner})
}

// NetworkDel deletes a network (the daemon refuses while interfaces are attached to it).
func (d *Daemon) NetworkDel(name string) error {
	return d.Do(ctl.NetworkDel{Name: name})
}

// RouteAdd adds a route in a network's VRF.
func (d *Daemon) RouteAdd(r Route) error { return d.route(true, r) }

// RouteDel deletes a route of a network's VRF.
func (d *Daemon) RouteDel(r Route) error { return d.route(false, r) }

func (d *Daemon) route(add bool, r Route) error {
	return d.Do(ctl.IPRoute{Add: add, Route: ctl.RouteSpec{Prefix: r.Prefix, Via: r.Via.String(), Network: r.Network}})
}

// State reads what the agent manages from the daemon: the networks it created (marked with
// Owner), and in each the routes it owns (see OwnedRoutes), their next hop being their
// tunnel's remote VTEP. Networks anyone else created are listed in Foreign and not read.
func (d *Daemon) State() (State, error) {
	st := State{Networks: map[string]*NetworkState{}, Routes: map[Route]bool{}, Foreign: map[string]bool{}, Taken: map[Route]bool{}}
	nets, err := d.Networks()
	if err != nil {
		return st, err
	}
	tuns, err := d.Tunnels()
	if err != nil {
		return st, err
	}
	byNet := map[string]map[string]netip.Addr{}
	for _, t := range tuns {
		if byNet[t.Network] == nil {
			byNet[t.Network] = map[string]netip.Addr{}
		}
		byNet[t.Network][t.Name] = t.Dst
	}
	for _, n := range nets {
		if n.Owner == nil || *n.Owner != Owner {
			st.Foreign[n.Name] = true
			continue
		}
		ns := &NetworkState{Name: n.Name, VNI: n.VNI, Ranges: n.Ranges, Table: n.Table, Interfaces: n.Interfaces}
		if n.Uplink != nil {
			ns.Uplink = *n.Uplink
		}
		st.Networks[n.Name] = ns
		entries, err := d.Fib(n.Table)
		if err != nil {
			return st, err
		}
		for _, e := range entries {
			if r, ok := OwnedRoutes(ns, e.Prefix, e.Path, byNet[n.Name]); ok {
				st.Routes[r] = true
			} else if e.Prefix.Bits() == 32 {
				st.Taken[taken(n.Name, e.Prefix)] = true
			}
		}
	}
	return st, nil
}
