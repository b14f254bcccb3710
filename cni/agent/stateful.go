package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"veclane.dev/cni/ctl"
	"veclane.dev/cni/kube"
)

// Stateful is what Kubernetes wants of one node's daemon: the services, policies and
// address sets package kube made from Services, EndpointSlices, NetworkPolicies and
// MultiNetworkPolicies, by name.
type Stateful struct {
	Services map[string]ctl.ServiceAdd
	Policies map[string]ctl.PolicyAdd
	Sets     map[string]ctl.AddressSetAdd
}

// NewStateful returns an empty Stateful.
func NewStateful() Stateful {
	return Stateful{
		Services: map[string]ctl.ServiceAdd{},
		Policies: map[string]ctl.PolicyAdd{},
		Sets:     map[string]ctl.AddressSetAdd{},
	}
}

// Kubernetes' names: what the agent creates, and so may delete. Everything else in the
// daemon (an operator's services, policies and sets) it leaves alone.
func ownedService(name string) bool { return strings.HasPrefix(name, kube.ServicePrefix+"/") }

func ownedPolicy(name string) bool {
	return strings.HasPrefix(name, kube.NetworkPolicyKind+"/") || strings.HasPrefix(name, kube.MultiNetworkPolicyKind+"/")
}

// StatefulApplier applies Stateful to a daemon. It remembers what it sent, and sends an
// object again only when it changed or the daemon lacks it (the daemon restarted): a
// round with nothing new costs three `show` requests.
type StatefulApplier struct {
	sent map[string]string
	// routed is what RoutePods last made in each pod (container/interface).
	routed map[string]routeMemo
}

// Apply makes the daemon's Kubernetes objects what want says: address sets before the
// policies naming them, policies before services; then the deletions in the reverse order.
// A refused request is listed in failed and retried next round; a failed connection ends
// the round with an error.
func (a *StatefulApplier) Apply(d *Daemon, want Stateful) (applied, failed []string, err error) {
	if a.sent == nil {
		a.sent = map[string]string{}
	}
	svcs, err := ctl.Call[ctl.Services](d.Client, ctl.ShowService{})
	if err != nil {
		return nil, nil, err
	}
	pols, err := ctl.Call[ctl.Policies](d.Client, ctl.ShowPolicy{})
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for _, s := range svcs.Services {
		have["service "+s.Spec.Name] = true
	}
	for _, p := range pols.Report.Policies {
		have["policy "+p.Name] = true
	}
	for _, s := range pols.Report.Sets {
		have["address-set "+s.Name] = true
	}
	do := func(key string, send func() error) error {
		err := send()
		switch {
		case err == nil:
			applied = append(applied, key)
		case ctl.Refused(err):
			failed = append(failed, fmt.Sprintf("%s: %v", key, err))
			delete(a.sent, key)
		default:
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	}
	put := func(kind, name string, req any, send func() error) error {
		key := kind + " " + name
		b, _ := json.Marshal(req)
		if have[key] && a.sent[key] == string(b) {
			return nil
		}
		a.sent[key] = string(b)
		return do(key, send)
	}
	for _, name := range sorted(want.Sets) {
		s := want.Sets[name]
		if err := put("address-set", name, s, func() error { return d.Do(s) }); err != nil {
			return applied, failed, err
		}
	}
	for _, name := range sorted(want.Policies) {
		p := want.Policies[name]
		if err := put("policy", name, p, func() error { return d.Do(p) }); err != nil {
			return applied, failed, err
		}
	}
	for _, name := range sorted(want.Services) {
		s := want.Services[name]
		if err := put("service", name, s, func() error { return d.Do(s) }); err != nil {
			return applied, failed, err
		}
	}
	del := func(kind, name string, owned, wanted bool, send func() error) error {
		key := kind + " " + name
		if !owned || wanted {
			return nil
		}
		delete(a.sent, key)
		return do(key+" (deleted)", send)
	}
	for _, p := range pols.Report.Policies {
		_, wanted := want.Policies[p.Name]
		r := ctl.PolicyDel{Name: p.Name}
		if err := del("policy", p.Name, ownedPolicy(p.Name), wanted, func() error { return d.Do(r) }); err != nil {
			return applied, failed, err
		}
	}
	for _, s := range pols.Report.Sets {
		_, wanted := want.Sets[s.Name]
		r := ctl.AddressSetDel{Name: s.Name}
		if err := del("address-set", s.Name, ownedPolicy(s.Name), wanted, func() error { return d.Do(r) }); err != nil {
			return applied, failed, err
		}
	}
	for _, s := range svcs.Services {
		_, wanted := want.Services[s.Spec.Name]
		r := ctl.ServiceDel{Name: s.Spec.Name}
		if err := del("service", s.Spec.Name, ownedService(s.Spec.Name), wanted, func() error { return d.Do(r) }); err != nil {
			return applied, failed, err
		}
	}
	return applied, failed, nil
}

func sorted[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
