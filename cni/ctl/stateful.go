package ctl

import (
	"encoding/json"
	"net/netip"
)

// Services, network policies and address sets, as the daemon's ServiceSpec, PolicySpec and
// policy::SetSpec (crates/api/src/config/{service,policy}.rs) spell them: kebab-case fields.

// Backend is one backend of a service; State is "ready" (or empty), "terminating" or
// "not-ready", as an EndpointSlice's conditions say.
type Backend struct {
	Addr  netip.Addr `json:"addr"`
	Port  uint16     `json:"port"`
	State string     `json:"state,omitempty"`
}

// ServiceAdd is `service add`: flows to VIP:Port over Protocol ("tcp" or "udp") in Network
// balanced over Backends; a name in use is replaced.
type ServiceAdd struct {
	Name     string     `json:"name"`
	Network  string     `json:"network,omitempty"`
	Table    uint32     `json:"table,omitempty"`
	VIP      netip.Addr `json:"vip"`
	Port     uint16     `json:"port"`
	Protocol string     `json:"protocol"`
	Backends []Backend  `json:"backends"`
	// Local is internalTrafficPolicy Local; AffinitySeconds sessionAffinity ClientIP.
	Local           bool   `json:"local,omitempty"`
	AffinitySeconds uint32 `json:"affinity-seconds,omitempty"`
	// NodePort (on the node's addresses) and ExternalIPs (on Port) let clients of the
	// underlay's table (ExternalTable, 0) in. ExternalLocal is externalTrafficPolicy Local;
	// otherwise external flows reach backends from ExternalSource, an address of the network
	// routed to this node.
	NodePort       uint16       `json:"node-port,omitempty"`
	ExternalIPs    []netip.Addr `json:"external-ips,omitempty"`
	ExternalTable  uint32       `json:"external-table,omitempty"`
	ExternalLocal  bool         `json:"external-local,omitempty"`
	ExternalSource *netip.Addr  `json:"external-source,omitempty"`
}

// ServiceDel deletes a service and flushes its sessions.
type ServiceDel struct {
	Name string `json:"name"`
}

// ShowService lists the services.
type ShowService struct{}

// Services is the reply to ShowService.
type Services struct {
	Services []ServiceInfo `json:"services"`
}

// ServiceInfo is a service as the daemon holds it, with its live sessions.
type ServiceInfo struct {
	Spec     ServiceAdd `json:"spec"`
	Sessions uint64     `json:"sessions"`
}

// CIDR is an ipBlock: Prefix but Except.
type CIDR struct {
	Prefix netip.Prefix   `json:"prefix"`
	Except []netip.Prefix `json:"except,omitempty"`
}

// Peer is one peer of a rule: a CIDR or a named address set (exactly one of the two).
type Peer struct {
	CIDR *CIDR  `json:"cidr,omitempty"`
	Set  string `json:"set,omitempty"`
}

// PortRange is ports First to Last (endPort).
type PortRange struct {
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

// PortMatch is a protocol ("tcp", "udp", "sctp", "icmp") and, but for ICMP, its ports (nil:
// all of them).
type PortMatch struct {
	Protocol string     `json:"protocol"`
	Port     *PortRange `json:"port,omitempty"`
}

// Rule allows flows from (ingress) or to (egress) any of Peers on any of Ports; empty lists
// match everything.
type Rule struct {
	Peers []Peer      `json:"peers"`
	Ports []PortMatch `json:"ports"`
}

// PolicyAdd is `policy add`: a NetworkPolicy on the interfaces named. A nil direction is not
// covered; a non-nil empty one is isolated with nothing allowed.
type PolicyAdd struct {
	Name       string   `json:"name"`
	Interfaces []string `json:"interfaces,omitempty"`
	Ingress    *[]Rule  `json:"ingress,omitempty"`
	Egress     *[]Rule  `json:"egress,omitempty"`
}

// PolicyDel deletes a policy.
type PolicyDel struct {
	Name string `json:"name"`
}

// AddressSetAdd is `address-set add`: a named set of addresses for rules' peers.
type AddressSetAdd struct {
	Name    string         `json:"name"`
	Members []netip.Prefix `json:"members"`
}

// MarshalJSON sends an empty set's members as [] (the daemon refuses null).
func (a AddressSetAdd) MarshalJSON() ([]byte, error) {
	type plain AddressSetAdd
	if a.Members == nil {
		a.Members = []netip.Prefix{}
	}
	return json.Marshal(plain(a))
}

// AddressSetDel deletes an address set.
type AddressSetDel struct {
	Name string `json:"name"`
}

// ShowPolicy lists the policies, the address sets and each interface's compiled rules.
type ShowPolicy struct{}

// Policies is the reply to ShowPolicy (the interfaces' compiled rules are not read here).
type Policies struct {
	Report struct {
		Policies []PolicyAdd `json:"policies"`
		Sets     []SetInfo   `json:"sets"`
	} `json:"report"`
}

// SetInfo is an address set as show_policy lists it: its name and size.
type SetInfo struct {
	Name    string `json:"name"`
	Members int    `json:"members"`
}

func (ServiceAdd) RequestName() string    { return "service_add" }
func (ShowPolicy) RequestName() string    { return "show_policy" }
func (ServiceDel) RequestName() string    { return "service_del" }
func (ShowService) RequestName() string   { return "show_service" }
func (PolicyAdd) RequestName() string     { return "policy_add" }
func (PolicyDel) RequestName() string     { return "policy_del" }
func (AddressSetAdd) RequestName() string { return "address_set_add" }
func (AddressSetDel) RequestName() string { return "address_set_del" }

func (ServiceAdd) reply() Ok        { return Ok{} }
func (ServiceDel) reply() Ok        { return Ok{} }
func (ShowService) reply() Services { return Services{} }
func (ShowPolicy) reply() Policies  { return Policies{} }
func (PolicyAdd) reply() Ok         { return Ok{} }
func (PolicyDel) reply() Ok         { return Ok{} }
func (AddressSetAdd) reply() Ok     { return Ok{} }
func (AddressSetDel) reply() Ok     { return Ok{} }

func (Services) ReplyName() string { return "services" }
func (Policies) ReplyName() string { return "policies" }
