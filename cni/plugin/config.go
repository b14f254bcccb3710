package plugin

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"veclane.dev/cni/etcdclient"
	"veclane.dev/cni/pod"
)

// timeout bounds every call to etcd: a plugin the runtime waits for must not hang.
const timeout = 10 * time.Second

// defaultGateway is the pod's next hop for the network (pod.Gateway).
var defaultGateway = pod.Gateway.String()

type ifaceConf struct {
	// Kind is "tap" (default) or "memif".
	Kind   string `json:"kind"`
	Queues uint16 `json:"queues,omitempty"`
	MTU    uint16 `json:"mtu,omitempty"`
	// memif: the socket in the pod's namespace (default "@veclane-<ifname>", abstract),
	// its rings, and the mode the pod speaks ("ethernet", the default, or "ip": bare IPv4).
	Socket     string `json:"socket,omitempty"`
	RingSize   uint32 `json:"ring_size,omitempty"`
	BufferSize uint32 `json:"buffer_size,omitempty"`
	Mode       string `json:"mode,omitempty"`
	// RegionLimitMiB bounds the memory the pod's regions may take in the daemon (default:
	// what its rings can use, twice over); a zero-copy pod that hands over its whole buffer
	// memory may need more.
	RegionLimitMiB uint32 `json:"region_limit_mib,omitempty"`
	// RxMode "polling" keeps the daemon's workers polling its queues; "interrupt" or
	// "adaptive" (or nothing) leave them to the daemon's own mode.
	RxMode string `json:"rx_mode,omitempty"`
	// Anti-spoofing: the daemon takes packets from the pod only from its own address and
	// these prefixes (a pod that routes for others declares what it sends from);
	// source_check false turns the check off.
	Forwards    []string `json:"forwards,omitempty"`
	SourceCheck *bool    `json:"source_check,omitempty"`
}

type netConf struct {
	types.PluginConf
	NetworkName string    `json:"network_name"`
	Interface   ifaceConf `json:"interface"`
	CtlSocket   string    `json:"ctl_socket"`
	// etcd_endpoints and the TLS settings, where the attachments are recorded.
	etcdclient.Settings
	Gateway string `json:"gateway"`
}

func configError(msg string) error {
	return types.NewError(types.ErrInvalidNetworkConfig, msg, "")
}

// load reads and checks the configuration, filling in the defaults.
func load(stdin []byte) (*netConf, error) {
	var c netConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "the network configuration is not JSON", err.Error())
	}
	if c.NetworkName == "" {
		c.NetworkName = c.Name
	}
	if c.NetworkName == "" {
		return nil, configError("neither network_name nor the network's name is set")
	}
	if c.IPAM.Type == "" {
		return nil, configError("ipam.type is missing: name the IPAM plugin (veclane-ipam)")
	}
	if len(c.Endpoints) == 0 {
		return nil, configError("etcd_endpoints is missing (the attachments are recorded there)")
	}
	if c.CtlSocket == "" {
		c.CtlSocket = "/run/veclane/ctl.sock"
	}
	if c.Gateway == "" {
		c.Gateway = defaultGateway
	}
	if _, err := netip.ParseAddr(c.Gateway); err != nil {
		return nil, configError("gateway " + c.Gateway + " is no IPv4 address")
	}
	switch c.Interface.Kind {
	case "":
		c.Interface.Kind = "tap"
	case "tap", "memif":
	default:
		return nil, configError(fmt.Sprintf("interface.kind %q: expected tap or memif", c.Interface.Kind))
	}
	if c.Interface.Mode != "" && c.Interface.Mode != "ethernet" && c.Interface.Mode != "ip" {
		return nil, configError(fmt.Sprintf("interface.mode %q: expected ethernet or ip", c.Interface.Mode))
	}
	switch c.Interface.RxMode {
	case "", "polling", "interrupt", "adaptive":
	default:
		return nil, configError(fmt.Sprintf("interface.rx_mode %q: expected polling, interrupt or adaptive", c.Interface.RxMode))
	}
	for _, f := range c.Interface.Forwards {
		if p, err := netip.ParsePrefix(f); err != nil || !p.Addr().Is4() {
			return nil, configError(fmt.Sprintf("interface.forwards %q: expected an IPv4 prefix A.B.C.D/L", f))
		}
	}
	if c.Interface.SourceCheck != nil && !*c.Interface.SourceCheck && len(c.Interface.Forwards) > 0 {
		return nil, configError("interface.forwards lists what the source check lets through; source_check is false")
	}
	if c.Interface.Socket != "" {
		if err := pod.CheckMemifSocket(c.Interface.Socket); err != nil {
			return nil, configError("interface.socket: " + err.Error())
		}
	}
	if c.Interface.Kind == "tap" && (c.Interface.Socket != "" || c.Interface.RingSize != 0 || c.Interface.BufferSize != 0 || c.Interface.Mode != "" || c.Interface.RxMode != "" || c.Interface.RegionLimitMiB != 0) {
		return nil, configError("interface.socket, ring_size, buffer_size, region_limit_mib, mode and rx_mode are memif settings; kind is tap")
	}
	return &c, nil
}

func memifSocket(c *netConf, ifName string) string {
	if c.Interface.Socket != "" {
		return c.Interface.Socket
	}
	return "@veclane-" + ifName
}
