package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/pod"
)

// restorePods makes again the pod interfaces the cluster records on this node and the
// daemon lacks (it restarted, and its state went with it): the daemon's side and, for a tap
// (whose device went with the daemon's fds), the pod's side. A pod whose namespace is gone
// is left for CNI DEL or GC; one whose network the daemon does not have waits for it. The
// attachment is read again just before and just after: a DEL that deleted it (and the
// interface) since the round's snapshot must not find the interface made again.
//
// What it acts on as root comes from etcd, so each attachment is checked first (see
// restorable and pod.OpenNetns); a refused one is reported in round.Problems and nothing of
// it is made.
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
	netHave, owned := map[string]bool{}, map[string]bool{}
	for _, n := range nets {
		netHave[n.Name] = true
		owned[n.Name] = n.Owner != nil && *n.Owner == Owner
	}
	inCluster := map[string]bool{}
	for _, n := range snap.Networks {
		inCluster[n.Name] = true
	}
	for k := range snap.Attachments {
		a := &snap.Attachments[k]
		if a.Node != self || a.Interface == nil || have[a.Interface.Name] || !netHave[a.Network] {
			continue
		}
		if !inCluster[a.Network] || !owned[a.Network] {
			round.Problems = append(round.Problems, fmt.Sprintf("pod %s interface %s: network %s is not a cluster network this agent manages, so its range cannot vouch for the attachment: not restored", a.ContainerID, a.IfName, a.Network))
			continue
		}
		if err := restorable(a); err != nil {
			round.Problems = append(round.Problems, fmt.Sprintf("pod %s interface %s: %v: not restored", a.ContainerID, a.IfName, err))
			continue
		}
		target, err := pod.OpenNetns(a.Interface.Netns)
		if err != nil {
			var gone ns.NSPathNotExistErr
			if errors.As(err, &gone) {
				round.Problems = append(round.Problems, fmt.Sprintf("pod %s interface %s: its namespace %s is gone: left for CNI DEL or GC", a.ContainerID, a.IfName, a.Interface.Netns))
			} else {
				round.Problems = append(round.Problems, fmt.Sprintf("pod %s interface %s: %v: not restored", a.ContainerID, a.IfName, err))
			}
			continue
		}
		err = restorePod(ctx, s, d, a, target, round)
		_ = target.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// restorable says what in attachment a differs from what the CNI plugin records, if
// anything: the daemon's interface is named and addressed as the plugin names it
// (pod.DaemonName, pod.MACs), so an attachment cannot make or replace any other interface.
// A memif socket must be abstract (pod.CheckMemifSocket). Its address and routes were checked against its network by the snapshot.
func restorable(a *cluster.PodAttachment) error {
	i := a.Interface
	if i.Kind == "memif" {
		if err := pod.CheckMemifSocket(i.Socket); err != nil {
			return err
		}
	}
	if want := pod.DaemonName(a.ContainerID, a.IfName); i.Name != want {
		return fmt.Errorf("interface name %q is not the plugin's %q", i.Name, want)
	}
	hostMAC, ourMAC := pod.MACs(a.ContainerID, a.IfName)
	if i.MAC != ourMAC.String() || i.HostMAC != hostMAC.String() {
		return fmt.Errorf("MACs %s/%s are not the plugin's %s/%s", i.MAC, i.HostMAC, ourMAC, hostMAC)
	}
	return nil
}

// restorePod makes one checked attachment's interface again, in target (its namespace,
// opened and checked by pod.OpenNetns).
func restorePod(ctx context.Context, s *cluster.Store, d *Daemon, a *cluster.PodAttachment, target ns.NetNS, round *Round) error {
	act := Action{Kind: "pod-add", Pod: a}
	if there, err := s.HasAttachment(ctx, a.Network, a.ContainerID, a.IfName); err != nil || !there {
		return err
	}
	if err := pod.Attach(d.Client, a); err != nil {
		if !ctl.Refused(err) {
			return fmt.Errorf("%s: %w", act, err)
		}
		round.Failed = append(round.Failed, fmt.Sprintf("%s: %v", act, err))
		return nil
	}
	if a.Interface.Kind == "tap" {
		// The daemon opened the namespace by its path; configured here through the one
		// checked, a tap the daemon put anywhere else is not found, and is deleted.
		if err := pod.Configure(a, target); err != nil {
			// Deleted, so that the next round tries the whole again.
			_ = d.DeleteInterface(a.Interface.Name)
			round.Failed = append(round.Failed, fmt.Sprintf("%s: the pod's side: %v", act, err))
			return nil
		}
	}
	if there, err := s.HasAttachment(ctx, a.Network, a.ContainerID, a.IfName); err != nil || !there {
		// DEL came in between: what was just made is not the pod's any more.
		_ = d.DeleteInterface(a.Interface.Name)
		return err
	}
	round.Applied = append(round.Applied, act)
	return nil
}
