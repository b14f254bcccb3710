package agent

import (
	"net/netip"

	"veclane.dev/cni/ctl"
)

// Daemon is a connection to a veclane daemon's control API (see package ctl), with the
// requests the agent makes.
type Daemon struct{ *ctl.Client }

// DialDaemon connects to the control socket at path.
func DialDaemon(path string) (*Daemon, error) {
	c, err := ctl.Dial(path)
	if err != nil {
		return nil, err
	}
	return &Daemon{c}, nil
}

// DaemonError is a request the daemon refused, with its reason.
type DaemonError = ctl.Error

func (d *Daemon) call(req map[string]any, out any) error { return d.Call(req, out) }

// DaemonNetwork is a network as `show network` reports it.
type DaemonNetwork struct {
	Name       string         `json:"name"`
	VNI        uint32         `json:"vni"`
	Ranges     []netip.Prefix `json:"ranges"`
	Table      uint32         `json:"table"`
	Interfaces []string       `json:"interfaces"`
	Uplink     *string        `json:"uplink"`
	Owner      *string        `json:"owner"`
}

// Owner is what the agent marks the networks it creates with (`network add ... owner`): it
// manages those, and leaves every other network of the daemon alone.
const Owner = "veclane-agent"

// Networks returns the daemon's networks.
func (d *Daemon) Networks() ([]DaemonNetwork, error) {
	var r struct {
		Networks []DaemonNetwork `json:"networks"`
	}
	err := d.call(map[string]any{"request": "show_network"}, &r)
	return r.Networks, err
}

// FibEntry is one entry of a table, as `show ip fib` reports it.
type FibEntry = ctl.FibEntry

// Tunnel is a VXLAN tunnel as `show vxlan tunnel` reports it.
type Tunnel struct {
	Name    string     `json:"name"`
	Network string     `json:"network"`
	VNI     uint32     `json:"vni"`
	Src     netip.Addr `json:"src"`
	Dst     netip.Addr `json:"dst"`
	Uplink  string     `json:"uplink"`
	Routes  int        `json:"routes"`
}

// Tunnels returns the daemon's VXLAN tunnels.
func (d *Daemon) Tunnels() ([]Tunnel, error) {
	var r struct {
		Tunnels []Tunnel `json:"tunnels"`
	}
	err := d.call(map[string]any{"request": "show_vxlan_tunnel"}, &r)
	return r.Tunnels, err
}

// NetworkAdd creates a network with its VRF.
func (d *Daemon) NetworkAdd(n *NetworkState) error {
	req := map[string]any{"request": "network_add", "name": n.Name, "vni": n.VNI, "ranges": n.Ranges, "owner": Owner}
	if n.Uplink != "" {
		req["uplink"] = n.Uplink
	}
	return d.call(req, nil)
}

// NetworkDel deletes a network (the daemon refuses while interfaces are attached to it).
func (d *Daemon) NetworkDel(name string) error {
	return d.call(map[string]any{"request": "network_del", "name": name}, nil)
}

// RouteAdd adds a route in a network's VRF; RouteDel deletes it.
func (d *Daemon) RouteAdd(r Route) error { return d.route(true, r) }

// RouteDel deletes a route of a network's VRF.
func (d *Daemon) RouteDel(r Route) error { return d.route(false, r) }

func (d *Daemon) route(add bool, r Route) error {
	return d.call(map[string]any{"request": "ip_route", "add": add, "route": map[string]any{
		"prefix": r.Prefix.String(), "via": r.Via.String(), "network": r.Network,
	}}, nil)
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
