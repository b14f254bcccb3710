package ctl

import "net/netip"

// The replies, as crates/api/src/lib.rs's `Reply` (`#[serde(tag = "reply", rename_all =
// "snake_case")]`) spells them (the error reply is Error, read by Call). An `Option` of the
// daemon's is a pointer here (nil: none).

// Ok is the reply of a request that changes something and returns nothing.
type Ok struct{}

// Version is the reply to ShowVersion.
type Version struct {
	Version    string `json:"version"`
	Workers    int    `json:"workers"`
	RuntimeDir string `json:"runtime_dir"`
}

// Interfaces is the reply to ShowInterface.
type Interfaces struct {
	Interfaces []Interface `json:"interfaces"`
}

// Interface is one interface as `show interface` reports it (the daemon's InterfaceInfo).
type Interface struct {
	Name  string `json:"name"`
	Index uint32 `json:"index"`
	// Device is what only its kind has.
	Device  Device `json:"device"`
	MAC     string `json:"mac"`
	AdminUp bool   `json:"admin_up"`
	// Connected: memif: a peer is connected; af-packet: the host interface is there.
	Connected bool           `json:"connected"`
	Table     uint32         `json:"table"`
	Network   *string        `json:"network"`
	Addresses []netip.Prefix `json:"addresses"`
	MTU       uint16         `json:"mtu"`
	Peer      *string        `json:"peer"`
	// Queues in use (none while a memif is not connected).
	RxQueues             uint16  `json:"rx_queues"`
	TxQueues             uint16  `json:"tx_queues"`
	RxPackets            uint64  `json:"rx_packets"`
	RxBytes              uint64  `json:"rx_bytes"`
	TxPackets            uint64  `json:"tx_packets"`
	TxBytes              uint64  `json:"tx_bytes"`
	RxErrors             uint64  `json:"rx_errors"`
	TxNoRoom             uint64  `json:"tx_no_room"`
	RxNoBuffer           uint64  `json:"rx_no_buffer"`
	TxRingFull           uint64  `json:"tx_ring_full"`
	Interrupts           uint64  `json:"interrupts"`
	Connects             uint64  `json:"connects"`
	Disconnects          uint64  `json:"disconnects"`
	LastDisconnectReason *string `json:"last_disconnect_reason"`
	// Pod is the container id it belongs to, if its creator said.
	Pod *string `json:"pod"`
	// AllowedSources are the only sources it takes packets from; nil when it checks none.
	AllowedSources *[]netip.Prefix `json:"allowed_sources"`
}

// Device is the kind-specific part of an interface (the daemon's DeviceInfo, tagged by
// "kind": memif, af-packet, af-xdp, tap, vxlan): the fields of every kind in one struct,
// those of other kinds zero.
type Device struct {
	Kind string `json:"kind"`
	// memif.
	Role       Role   `json:"role"`
	Socket     string `json:"socket"`
	ID         uint32 `json:"id"`
	RingSize   uint32 `json:"ring_size"`
	BufferSize uint32 `json:"buffer_size"`
	// RegionLimitMiB: a master's limit on its peer's regions.
	RegionLimitMiB uint32  `json:"region_limit_mib"`
	MaxRxQueues    uint16  `json:"max_rx_queues"`
	MaxTxQueues    uint16  `json:"max_tx_queues"`
	Copy           *string `json:"copy"`
	// Mode: memif "ethernet" or "ip"; af-xdp "copy" or "zero-copy".
	Mode string `json:"mode"`
	// Netns: memif (where its socket listens) and tap (where its device is), if not the
	// daemon's.
	Netns *string `json:"netns"`
	// af-packet and af-xdp; Attach af-xdp's "driver" or "skb".
	HostIf string `json:"host_if"`
	Attach string `json:"attach"`
	// tap.
	HostIfName string `json:"host_if_name"`
	HostMAC    string `json:"host_mac"`
	// vxlan.
	VNI    uint32     `json:"vni"`
	Src    netip.Addr `json:"src"`
	Dst    netip.Addr `json:"dst"`
	Routes int        `json:"routes"`
}

// RxPlacement is the reply to ShowRxPlacement.
type RxPlacement struct {
	Placement []Placement `json:"placement"`
}

// Placement is one rx queue's worker.
type Placement struct {
	Interface string `json:"interface"`
	Queue     uint16 `json:"queue"`
	Worker    int    `json:"worker"`
	Core      *int   `json:"core"`
	// Mode is "polling", "interrupt" or "adaptive".
	Mode      string `json:"mode"`
	Connected bool   `json:"connected"`
}

// Created is the reply to CreateTap and CreateMemif.
type Created struct {
	Name  string `json:"name"`
	Index uint32 `json:"index"`
}

// Fib is the reply to ShowIPFib.
type Fib struct {
	Entries []FibEntry `json:"entries"`
}

// FibEntry is one route.
type FibEntry struct {
	Table  uint32       `json:"table"`
	Prefix netip.Prefix `json:"prefix"`
	// Path is `receive`, `drop`, `glean memif0/1`, `via 10.0.0.2 memif0/1 02:..` and so on.
	Path string `json:"path"`
}

// Networks is the reply to ShowNetwork.
type Networks struct {
	Networks []Network `json:"networks"`
}

// Network is one network as `show network` reports it.
type Network struct {
	Name   string         `json:"name"`
	VNI    uint32         `json:"vni"`
	Ranges []netip.Prefix `json:"ranges"`
	// Table is the VRF the network owns on this node.
	Table      uint32   `json:"table"`
	Interfaces []string `json:"interfaces"`
	Uplink     *string  `json:"uplink"`
	Owner      *string  `json:"owner"`
}

// Tunnels is the reply to ShowVxlanTunnel.
type Tunnels struct {
	Tunnels []Tunnel `json:"tunnels"`
}

// Tunnel is one VXLAN tunnel as `show vxlan tunnel` reports it.
type Tunnel struct {
	Name    string     `json:"name"`
	Network string     `json:"network"`
	VNI     uint32     `json:"vni"`
	Src     netip.Addr `json:"src"`
	Dst     netip.Addr `json:"dst"`
	Uplink  string     `json:"uplink"`
	// MTU is the inner MTU: the uplink's minus 50.
	MTU       uint16 `json:"mtu"`
	Routes    int    `json:"routes"`
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
}

func (Ok) ReplyName() string          { return "ok" }
func (Version) ReplyName() string     { return "version" }
func (Interfaces) ReplyName() string  { return "interfaces" }
func (RxPlacement) ReplyName() string { return "rx_placement" }
func (Created) ReplyName() string     { return "created" }
func (Fib) ReplyName() string         { return "fib" }
func (Networks) ReplyName() string    { return "networks" }
func (Tunnels) ReplyName() string     { return "tunnels" }
