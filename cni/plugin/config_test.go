package plugin

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"veclane.dev/cni/cluster"
)

// confWith is a valid configuration with set's keys changed (nil: removed); under "interface"
// and "ipam" a map's keys are changed one by one.
func confWith(t *testing.T, set map[string]any) []byte {
	t.Helper()
	c := map[string]any{
		"cniVersion": "1.1.0", "name": "blue", "type": "veclane-cni",
		"etcd_endpoints": []string{"http://127.0.0.1:2379"},
		"interface":      map[string]any{},
		"ipam":           map[string]any{"type": "veclane-ipam", "range": "10.1.0.0/24"},
	}
	for k, v := range set {
		if sub, ok := v.(map[string]any); ok && c[k] != nil {
			maps.Copy(c[k].(map[string]any), sub)
			continue
		}
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// What load accepts, with its defaults, and what it refuses, with the CNI error code and the
// key at fault.
func TestLoad(t *testing.T) {
	type want struct {
		network, kind, socket, gateway string
	}
	defaults := want{network: "blue", kind: "tap", socket: "/run/veclane/ctl.sock", gateway: "169.254.1.1"}
	for _, c := range []struct {
		name string
		set  map[string]any
		// raw replaces the configuration when set.
		raw  string
		want want
		// code and msg: the error (code 0: none).
		code uint
		msg  string
	}{
		{name: "defaults", want: defaults},
		{name: "network_name names the network", set: map[string]any{"network_name": "red"},
			want: want{"red", "tap", defaults.socket, defaults.gateway}},
		{name: "ctl_socket and gateway", set: map[string]any{"ctl_socket": "/tmp/ctl.sock", "gateway": "10.1.0.1"},
			want: want{"blue", "tap", "/tmp/ctl.sock", "10.1.0.1"}},
		{name: "memif in ip mode, polled", set: map[string]any{"interface": map[string]any{"kind": "memif", "mode": "ip", "rx_mode": "polling", "ring_size": 512}},
			want: want{"blue", "memif", defaults.socket, defaults.gateway}},
		{name: "not JSON", raw: `{"cniVersion":`, code: types.ErrDecodingFailure, msg: "not JSON"},
		{name: "no network name", set: map[string]any{"name": nil}, code: types.ErrInvalidNetworkConfig, msg: "neither network_name"},
		{name: "no IPAM plugin", set: map[string]any{"ipam": map[string]any{"type": nil}}, code: types.ErrInvalidNetworkConfig, msg: "ipam.type is missing"},
		{name: "no etcd", set: map[string]any{"etcd_endpoints": nil}, code: types.ErrInvalidNetworkConfig, msg: "etcd_endpoints is missing"},
		{name: "a gateway that is no address", set: map[string]any{"gateway": "gw"}, code: types.ErrInvalidNetworkConfig, msg: "gateway gw"},
		{name: "an unknown kind", set: map[string]any{"interface": map[string]any{"kind": "veth"}}, code: types.ErrInvalidNetworkConfig, msg: `interface.kind "veth"`},
		{name: "an unknown mode", set: map[string]any{"interface": map[string]any{"kind": "memif", "mode": "punt"}}, code: types.ErrInvalidNetworkConfig, msg: `interface.mode "punt"`},
		{name: "an unknown rx_mode", set: map[string]any{"interface": map[string]any{"kind": "memif", "rx_mode": "sleepy"}}, code: types.ErrInvalidNetworkConfig, msg: `interface.rx_mode "sleepy"`},
		{name: "forwards", set: map[string]any{"interface": map[string]any{"forwards": []string{"10.9.0.0/24"}}},
			want: defaults},
		{name: "a forward that is no prefix", set: map[string]any{"interface": map[string]any{"forwards": []string{"10.9.0.0"}}}, code: types.ErrInvalidNetworkConfig, msg: `interface.forwards "10.9.0.0"`},
		{name: "forwards with the check off", set: map[string]any{"interface": map[string]any{"forwards": []string{"10.9.0.0/24"}, "source_check": false}}, code: types.ErrInvalidNetworkConfig, msg: "source_check is false"},
		{name: "a memif socket on the host's file system", set: map[string]any{"interface": map[string]any{"kind": "memif", "socket": "/run/x.sock"}}, code: types.ErrInvalidNetworkConfig, msg: `interface.socket: memif socket "/run/x.sock" is not abstract`},
		{name: "memif settings on a tap", set: map[string]any{"interface": map[string]any{"socket": "@s"}}, code: types.ErrInvalidNetworkConfig, msg: "memif settings"},
		{name: "a memif region limit on a tap", set: map[string]any{"interface": map[string]any{"region_limit_mib": 64}}, code: types.ErrInvalidNetworkConfig, msg: "memif settings"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdin := confWith(t, c.set)
			if c.raw != "" {
				stdin = []byte(c.raw)
			}
			got, err := load(stdin)
			if c.code != 0 {
				var e *types.Error
				if !errors.As(err, &e) || e.Code != c.code || !strings.Contains(e.Msg, c.msg) {
					t.Fatalf("%v, want code %d with %q", err, c.code, c.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := (want{got.NetworkName, got.Interface.Kind, got.CtlSocket, got.Gateway}); g != c.want {
				t.Fatalf("%+v, want %+v", g, c.want)
			}
		})
	}
}

func TestThePodComesFromCNIArgs(t *testing.T) {
	got := podRef("IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1")
	if got == nil || *got != (cluster.PodRef{Namespace: "shop", Name: "web-0", UID: "u-1"}) {
		t.Fatalf("%+v", got)
	}
	for _, args := range []string{"", "IgnoreUnknown=1", "K8S_POD_NAME=web-0"} {
		if got := podRef(args); got != nil {
			t.Fatalf("%q: %+v", args, got)
		}
	}
}
