package agent

import (
	"context"
	"fmt"
	"time"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
)

// Round is what one reconciliation did.
type Round struct {
	// Revision is the etcd revision of the state it applied.
	Revision int64
	Applied  []Action
	// Failed pairs an action with the daemon's refusal; the next round tries again.
	Failed []string
	// Problems are parts of the cluster state this node cannot apply (see Desired), and
	// unreadable keys.
	Problems []string
	// Attachments are the state's pod attachments (every node's).
	Attachments []cluster.PodAttachment
}

// Reconcile reads the cluster state, reads the daemon's, and applies the difference. It
// changes nothing when etcd cannot be read: an unreachable etcd leaves the dataplane as it
// is. A refused action does not stop the others. cfg gives the node (its name and address),
// its uplinks and its node link.
func Reconcile(ctx context.Context, s *cluster.Store, d *Daemon, cfg *Config) (Round, error) {
	self := cfg.Node.Name
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return Round{}, err
	}
	var grace []string
	if cfg.nodes != nil {
		snap.Nodes, grace = cfg.nodes.withGrace(snap.Nodes, time.Now(), cfg.NodeGrace)
	}
	want, problems := Desired(snap, self, cfg.Uplinks)
	problems = append(problems, grace...)
	round := Round{Revision: snap.Revision, Problems: append(problems, snap.Invalid...), Attachments: snap.Attachments}
	have, err := d.State()
	if err != nil {
		return round, err
	}
	for name := range want.Networks {
		if have.Foreign[name] {
			round.Problems = append(round.Problems, fmt.Sprintf("network %s: the daemon has a network of that name the agent did not create (not owned by %s): left alone", name, Owner))
		}
	}
	for r := range want.Routes {
		if have.Taken[taken(r.Network, r.Prefix)] {
			round.Problems = append(round.Problems, fmt.Sprintf("network %s: %s is a local address here (a pod of this node, or an operator's route), yet a pod behind %s claims it: not routed there", r.Network, r.Prefix.Addr(), r.Via))
		}
	}
	for _, a := range Plan(want, have) {
		var err error
		switch a.Kind {
		case "route-del":
			err = d.RouteDel(a.Route)
		case "network-del":
			err = d.NetworkDel(a.Network.Name)
		case "network-add":
			err = d.NetworkAdd(a.Network)
		case "route-add":
			err = d.RouteAdd(a.Route)
		}
		if err != nil {
			if !ctl.Refused(err) {
				// The connection itself failed: the rest would too.
				return round, fmt.Errorf("%s: %w", a, err)
			}
			round.Failed = append(round.Failed, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		round.Applied = append(round.Applied, a)
	}
	if cfg.NodeLink != "" {
		if err := ensureNodeLink(d, snap, cfg, &round); err != nil {
			return round, err
		}
	}
	return round, restorePods(ctx, s, d, snap, self, &round)
}
