package agent

import (
	"context"
	"fmt"
	"os"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/pod"
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
// is. A refused action does not stop the others.
func Reconcile(ctx context.Context, s *cluster.Store, d *Daemon, self string, uplinks Uplinks) (Round, error) {
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return Round{}, err
	}
	want, problems := Desired(snap, self, uplinks)
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
	return round, restorePods(ctx, s, d, snap, self, &round)
}

// restorePods makes again the pod interfaces the cluster records on this node and the
// daemon lacks (it restarted, and its state went with it): the daemon's side and, for a tap
// (whose device went with the daemon's fds), the pod's side. A pod whose namespace is gone
// is left for CNI DEL or GC; one whose network the daemon does not have waits for it. The
// attachment is read again just before and just after: a DEL that deleted it (and the
// interface) since the round's snapshot must not find the interface made again.
func restorePods(ctx context.Context, s *cluster.Store, d *Daemon, snap *cluster.Snapshot, self string, round *Round) error {
	ifs, err := d.Interfaces()
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, i := range ifs {
		have[i.Name] = true
	}
	nets, err := d.Networks()
	if err != nil {
		return err
	}
	netHave := map[string]bool{}
	for _, n := range nets {
		netHave[n.Name] = true
	}
	for k := range snap.Attachments {
		a := &snap.Attachments[k]
		if a.Node != self || a.Interface == nil || have[a.Interface.Name] || !netHave[a.Network] {
			continue
		}
		if _, err := os.Stat(a.Interface.Netns); err != nil {
			round.Problems = append(round.Problems, fmt.Sprintf("pod %s interface %s: its namespace %s is gone: left for CNI DEL or GC", a.ContainerID, a.IfName, a.Interface.Netns))
			continue
		}
		act := Action{Kind: "pod-add", Pod: a}
		if there, err := s.HasAttachment(ctx, a.Network, a.ContainerID, a.IfName); err != nil || !there {
			if err != nil {
				return err
			}
			continue
		}
		if err := pod.Attach(d.Client, a); err != nil {
			if !ctl.Refused(err) {
				return fmt.Errorf("%s: %w", act, err)
			}
			round.Failed = append(round.Failed, fmt.Sprintf("%s: %v", act, err))
			continue
		}
		if a.Interface.Kind == "tap" {
			if err := pod.Configure(a); err != nil {
				// Deleted, so that the next round tries the whole again.
				_ = d.DeleteInterface(a.Interface.Name)
				round.Failed = append(round.Failed, fmt.Sprintf("%s: the pod's side: %v", act, err))
				continue
			}
		}
		if there, err := s.HasAttachment(ctx, a.Network, a.ContainerID, a.IfName); err != nil || !there {
			// DEL came in between: what was just made is not the pod's any more.
			_ = d.DeleteInterface(a.Interface.Name)
			if err != nil {
				return err
			}
			continue
		}
		round.Applied = append(round.Applied, act)
	}
	return nil
}
