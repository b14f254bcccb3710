package kube

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"veclane.dev/cni/ctl"
)

// Policy kinds: what the names of the daemon policies and address sets made from a
// NetworkPolicy or a MultiNetworkPolicy begin with ("np/NETWORK/NAMESPACE/NAME...").
const (
	NetworkPolicyKind      = "np"
	MultiNetworkPolicyKind = "mnp"
)

// PolicyRef names a policy object: its kind ("np" for a NetworkPolicy, "mnp" for a
// MultiNetworkPolicy), namespace and name, and the network it is translated for.
type PolicyRef struct {
	Kind      string
	Network   string
	Namespace string
	Name      string
}

func (r PolicyRef) String() string {
	return fmt.Sprintf("%s/%s/%s/%s", r.Kind, r.Network, r.Namespace, r.Name)
}

// NodePolicy is one policy object as one node's daemon enforces it: the policies (one per
// group of the node's selected pods whose named ports resolve alike; usually one) and the
// address sets their rules name.
type NodePolicy struct {
	Policies []ctl.PolicyAdd
	Sets     []ctl.AddressSetAdd
}

// Policy translates spec (a NetworkPolicy's, or a MultiNetworkPolicy's, which has the same
// fields) for the pods of ref.Network on node. Problems are parts that cannot be enforced
// (an IPv6 block, a named port on an ipBlock peer); they are left out, and said.
//
// Kubernetes' meaning, rule by rule: the policy selects the pods of its namespace that its
// podSelector matches; a direction is isolated if policyTypes names it (unset: Ingress, and
// Egress if there are egress rules); a rule allows flows from (to) any of its peers on any
// of its ports, an empty list meaning all; a peer is an ipBlock, or the pods a podSelector
// matches in the policy's namespace, or in the namespaces a namespaceSelector matches, or
// both at once; a named port is the selected pod's (ingress) or the peer pod's (egress)
// container port of that name and protocol.
func Policy(w *World, ref PolicyRef, spec *networkingv1.NetworkPolicySpec, node string) (NodePolicy, []string) {
	t := translation{w: w, ref: ref}
	sel, err := selector(&spec.PodSelector)
	if err != nil {
		return NodePolicy{}, []string{fmt.Sprintf("%s: podSelector: %v", ref, err)}
	}
	var targets []*Pod
	for _, p := range w.podsIn(ref.Network, func(ns string) bool { return ns == ref.Namespace }, sel) {
		if p.Networks[ref.Network].Node == node {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		return NodePolicy{}, nil
	}
	ingress, egress := directions(spec)
	var out []*[]ctl.Rule
	if egress {
		rules := []ctl.Rule{}
		for i, r := range spec.Egress {
			rules = append(rules, t.egressRules(i, r)...)
		}
		out = append(out, &rules)
	}
	// Ingress rules can differ per selected pod (named ports are the pod's own): pods whose
	// rules come out the same share one daemon policy.
	type group struct {
		rules      *[]ctl.Rule
		interfaces []string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, p := range targets {
		var rules *[]ctl.Rule
		if ingress {
			rs := []ctl.Rule{}
			for i, r := range spec.Ingress {
				if rule, ok := t.ingressRule(i, r, p); ok {
					rs = append(rs, rule)
				}
			}
			rules = &rs
		}
		k, _ := json.Marshal(rules)
		g := byKey[string(k)]
		if g == nil {
			g = &group{rules: rules}
			byKey[string(k)] = g
			groups = append(groups, g)
		}
		g.interfaces = append(g.interfaces, p.Networks[ref.Network].Interface)
	}
	var np NodePolicy
	for k, g := range groups {
		name := ref.String()
		if len(groups) > 1 {
			name = fmt.Sprintf("%s#%d", name, k)
		}
		pa := ctl.PolicyAdd{Name: name, Interfaces: g.interfaces, Ingress: g.rules}
		if egress {
			pa.Egress = out[0]
		}
		np.Policies = append(np.Policies, pa)
	}
	np.Sets = t.usedSets()
	return np, t.problems
}

// directions says which directions spec isolates.
func directions(spec *networkingv1.NetworkPolicySpec) (ingress, egress bool) {
	if len(spec.PolicyTypes) == 0 {
		return true, len(spec.Egress) > 0
	}
	for _, t := range spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// translation is one policy's translation under way: the sets its rules made, and what
// could not be enforced.
type translation struct {
	w        *World
	ref      PolicyRef
	sets     map[string]ctl.AddressSetAdd
	used     map[string]bool
	problems []string
}

func (t *translation) problem(format string, a ...any) {
	p := fmt.Sprintf("%s: ", t.ref) + fmt.Sprintf(format, a...)
	for _, q := range t.problems {
		if q == p {
			return
		}
	}
	t.problems = append(t.problems, p)
}

// set names an address set of pods' addresses (made once per name) as a peer.
func (t *translation) set(name string, pods []*Pod) ctl.Peer {
	if t.sets == nil {
		t.sets, t.used = map[string]ctl.AddressSetAdd{}, map[string]bool{}
	}
	name = t.ref.String() + "/" + name
	if _, ok := t.sets[name]; !ok {
		t.sets[name] = ctl.AddressSetAdd{Name: name, Members: hosts(pods, t.ref.Network)}
	}
	t.used[name] = true
	return ctl.Peer{Set: name}
}

func (t *translation) usedSets() []ctl.AddressSetAdd {
	var out []ctl.AddressSetAdd
	for name := range t.used {
		out = append(out, t.sets[name])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// peerPods returns the pods a selector peer picks, or false for an ipBlock.
func (t *translation) peerPods(p networkingv1.NetworkPolicyPeer) ([]*Pod, bool, error) {
	if p.PodSelector == nil && p.NamespaceSelector == nil {
		return nil, false, nil
	}
	nsOK := func(ns string) bool { return ns == t.ref.Namespace }
	if p.NamespaceSelector != nil {
		s, err := selector(p.NamespaceSelector)
		if err != nil {
			return nil, true, fmt.Errorf("namespaceSelector: %w", err)
		}
		nsOK = t.w.namespaces(s)
	}
	podSel := labels.Everything()
	if p.PodSelector != nil {
		s, err := selector(p.PodSelector)
		if err != nil {
			return nil, true, fmt.Errorf("podSelector: %w", err)
		}
		podSel = s
	}
	return t.w.podsIn(t.ref.Network, nsOK, podSel), true, nil
}

// peers translates a rule's peers: ipBlocks as CIDRs, selectors as address sets named
// after the rule (dir and index) and the peer's index. The pods each selector peer picks
// are returned too (nil for an ipBlock).
func (t *translation) peers(dir string, i int, ps []networkingv1.NetworkPolicyPeer) ([]ctl.Peer, [][]*Pod) {
	out := []ctl.Peer{}
	var pods [][]*Pod
	for j, p := range ps {
		sel, isSel, err := t.peerPods(p)
		switch {
		case err != nil:
			t.problem("%s rule %d peer %d: %v (the peer matches nothing)", dir, i, j, err)
			out = append(out, t.set(fmt.Sprintf("%s%d/%d", dir, i, j), nil))
			pods = append(pods, nil)
		case isSel:
			out = append(out, t.set(fmt.Sprintf("%s%d/%d", dir, i, j), sel))
			pods = append(pods, sel)
		case p.IPBlock != nil:
			if c, ok := t.cidr(dir, i, p.IPBlock); ok {
				out = append(out, ctl.Peer{CIDR: c})
				pods = append(pods, nil)
			}
		}
	}
	return out, pods
}

// cidr translates an ipBlock; IPv6 ones are left out (the dataplane is IPv4).
func (t *translation) cidr(dir string, i int, b *networkingv1.IPBlock) (*ctl.CIDR, bool) {
	pfx, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !pfx.Addr().Is4() {
		t.problem("%s rule %d: ipBlock %q is not an IPv4 CIDR: left out", dir, i, b.CIDR)
		return nil, false
	}
	c := &ctl.CIDR{Prefix: pfx.Masked()}
	for _, e := range b.Except {
		x, err := netip.ParsePrefix(e)
		if err != nil || !x.Addr().Is4() {
			t.problem("%s rule %d: except %q is not an IPv4 CIDR: left out", dir, i, e)
			continue
		}
		c.Except = append(c.Except, x.Masked())
	}
	return c, true
}

// protocol is a port's protocol in the daemon's words (TCP when unset).
func protocol(p *corev1.Protocol) string {
	if p == nil {
		return "tcp"
	}
	switch *p {
	case corev1.ProtocolUDP:
		return "udp"
	case corev1.ProtocolSCTP:
		return "sctp"
	}
	return "tcp"
}

func proto(p *corev1.Protocol) corev1.Protocol {
	if p == nil {
		return corev1.ProtocolTCP
	}
	return *p
}

// numeric translates a port given by number (or not at all); false for a named one.
func numeric(p networkingv1.NetworkPolicyPort) (ctl.PortMatch, bool) {
	m := ctl.PortMatch{Protocol: protocol(p.Protocol)}
	if p.Port == nil {
		return m, true
	}
	if p.Port.Type == intstr.String {
		return m, false
	}
	first := uint16(p.Port.IntVal)
	last := first
	if p.EndPort != nil && *p.EndPort >= p.Port.IntVal {
		last = uint16(*p.EndPort)
	}
	m.Port = &ctl.PortRange{First: first, Last: last}
	return m, true
}

// ingressRule translates ingress rule i for the selected pod p (whose own container ports
// named ports are); false if its ports all name ports p does not have: it matches nothing.
func (t *translation) ingressRule(i int, r networkingv1.NetworkPolicyIngressRule, p *Pod) (ctl.Rule, bool) {
	peers, _ := t.peers("in", i, r.From)
	ports := []ctl.PortMatch{}
	for _, pp := range r.Ports {
		if m, ok := numeric(pp); ok {
			ports = append(ports, m)
			continue
		}
		if n, ok := p.namedPort(pp.Port.StrVal, proto(pp.Protocol)); ok {
			ports = append(ports, ctl.PortMatch{Protocol: protocol(pp.Protocol), Port: &ctl.PortRange{First: n, Last: n}})
		}
	}
	if len(r.Ports) > 0 && len(ports) == 0 {
		return ctl.Rule{}, false
	}
	return ctl.Rule{Peers: peers, Ports: ports}, true
}

// egressRules translates egress rule i: its numeric ports as one rule to all its peers, and
// each named port as rules to the peer pods that have it, grouped by the number it names
// there (all the network's pods when the rule names no peer). ipBlock peers cannot resolve
// a name: they get the numeric ports only.
func (t *translation) egressRules(i int, r networkingv1.NetworkPolicyEgressRule) []ctl.Rule {
	peers, peerPods := t.peers("out", i, r.To)
	var ports []ctl.PortMatch
	var named []networkingv1.NetworkPolicyPort
	for _, pp := range r.Ports {
		if m, ok := numeric(pp); ok {
			ports = append(ports, m)
		} else {
			named = append(named, pp)
		}
	}
	if len(named) == 0 {
		if ports == nil {
			ports = []ctl.PortMatch{}
		}
		return []ctl.Rule{{Peers: peers, Ports: ports}}
	}
	var out []ctl.Rule
	if len(ports) > 0 {
		out = append(out, ctl.Rule{Peers: peers, Ports: ports})
	}
	// The pods a named port is looked up on: the selector peers', or every pod of the
	// network for a rule to anywhere.
	var candidates []*Pod
	seen := map[*Pod]bool{}
	for j, ps := range peerPods {
		if ps == nil && len(r.To) > 0 && r.To[j].IPBlock != nil {
			t.problem("out rule %d: a named port cannot apply to ipBlock peer %d: left out", i, j)
		}
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				candidates = append(candidates, p)
			}
		}
	}
	if len(r.To) == 0 {
		candidates = t.w.podsIn(t.ref.Network, func(string) bool { return true }, labels.Everything())
	}
	for _, pp := range named {
		byPort := map[uint16][]*Pod{}
		var nums []int
		for _, p := range candidates {
			if n, ok := p.namedPort(pp.Port.StrVal, proto(pp.Protocol)); ok {
				if byPort[n] == nil {
					nums = append(nums, int(n))
				}
				byPort[n] = append(byPort[n], p)
			}
		}
		sort.Ints(nums)
		for _, n := range nums {
			name := fmt.Sprintf("out%d/%s-%s-%d", i, pp.Port.StrVal, protocol(pp.Protocol), n)
			out = append(out, ctl.Rule{
				Peers: []ctl.Peer{t.set(name, byPort[uint16(n)])},
				Ports: []ctl.PortMatch{{Protocol: protocol(pp.Protocol), Port: &ctl.PortRange{First: uint16(n), Last: uint16(n)}}},
			})
		}
	}
	return out
}
