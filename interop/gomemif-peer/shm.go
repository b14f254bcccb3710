package main

// Read-only views of the memif rings that gomemif v0.1.0 has mapped.
//
// gomemif v0.1.0 exports no way to look at ring indices or descriptors, and
// its data path has bugs that can corrupt frames or panic on bad input (see
// README.md). To work around them the peer looks at the rings *before* it
// calls gomemif:
//
//   - RX: walk the S2M descriptors of the next packet, check every one of
//     them against the mapped regions and compute the frame length, so that
//     Queue.ReadPacket is only called for a complete, valid packet and with a
//     buffer of exactly the right size.
//   - TX: read the capacity the slave posted in the M2S descriptor at the
//     master's tail, so that Queue.WritePacket is only called for frames that
//     fit in one buffer (its chained path is broken).
//
// The view never writes to shared memory: every ring index, descriptor and
// payload write is still done by gomemif. The unexported gomemif fields are
// found by name with reflect, which is safe because go.mod pins
// go.fd.io/govpp/extras to exactly v0.1.0; if the names ever change the peer
// refuses the connection instead of guessing.

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"sync/atomic"
	"syscall"
	"unsafe"

	"go.fd.io/govpp/extras/gomemif/memif"
)

// memif 2.0 ring header layout with 64-byte cache lines, as hard-coded in
// gomemif v0.1.0 memif.go (ringSize = 128, ringHeadOffset = 6,
// ringTailOffset = 64, descSize = 16).
const (
	ringHeaderSize = 128
	ringFlagsOff   = 4
	ringHeadOff    = 6
	ringTailOff    = 64
	descSize       = 16
	descFlagNext   = 1
	memifCookie    = 0x3E31F20
)

// desc is one memif descriptor, copied out of shared memory.
type desc struct {
	flags  uint16
	region uint16
	length uint32
	offset uint32
}

// ringView is a read-only window on one ring inside the mapped regions.
type ringView struct {
	regions [][]byte // every region of the connection, by index
	mem     []byte   // the region that holds the ring
	off     int      // byte offset of the ring header in mem
	size    int      // number of descriptors (power of two)
}

// newRingView checks that a ring of 'size' entries at 'off' in region
// 'region' fits inside the mapped memory and is aligned for 32-bit loads.
func newRingView(regions [][]byte, region, off, size int) (*ringView, error) {
	if region < 0 || region >= len(regions) {
		return nil, fmt.Errorf("ring region %d does not exist (%d regions)", region, len(regions))
	}
	if size <= 0 || size&(size-1) != 0 || size > 1<<15 {
		return nil, fmt.Errorf("ring size %d is not a power of two <= 32768", size)
	}
	if off < 0 || off%4 != 0 {
		return nil, fmt.Errorf("ring offset %d is not 4-byte aligned", off)
	}
	mem := regions[region]
	end := uint64(off) + ringHeaderSize + uint64(size)*descSize
	if end > uint64(len(mem)) {
		return nil, fmt.Errorf("ring at offset %d with %d entries ends at %d, past the end of region %d (%d bytes)",
			off, size, end, region, len(mem))
	}
	return &ringView{regions: regions, mem: mem, off: off, size: size}, nil
}

func (r *ringView) word(at int) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.mem[at])))
}

func (r *ringView) cookie() uint32 { return r.word(r.off) }

// flags returns the ring flags word (bit 0 = MEMIF_RING_FLAG_MASK_INT).
func (r *ringView) flags() uint16 { return uint16(r.word(r.off + ringFlagsOff)) }

// head is written by the slave (for both ring directions).
func (r *ringView) head() uint16 { return uint16(r.word(r.off+ringFlagsOff) >> 16) }

// tail is written by the master (for both ring directions).
func (r *ringView) tail() uint16 { return uint16(r.word(r.off + ringTailOff)) }

func (r *ringView) desc(slot uint16) desc {
	at := r.off + ringHeaderSize + int(slot&uint16(r.size-1))*descSize
	var b [descSize]byte
	copy(b[:], r.mem[at:at+descSize])
	return desc{
		flags:  binary.LittleEndian.Uint16(b[0:]),
		region: binary.LittleEndian.Uint16(b[2:]),
		length: binary.LittleEndian.Uint32(b[4:]),
		offset: binary.LittleEndian.Uint32(b[8:]),
	}
}

// checkBuffer verifies that length bytes at d.offset in region d.region are
// inside the mapped memory, i.e. that gomemif's slice expression
// regions[d.region].data[offset:offset+length] cannot panic.
func (r *ringView) checkBuffer(d desc, length uint32) error {
	if int(d.region) >= len(r.regions) {
		return fmt.Errorf("descriptor region %d does not exist (%d regions)", d.region, len(r.regions))
	}
	if uint64(d.offset)+uint64(length) > uint64(len(r.regions[d.region])) {
		return fmt.Errorf("descriptor buffer [%d, +%d) is outside region %d (%d bytes)",
			d.offset, length, d.region, len(r.regions[d.region]))
	}
	return nil
}

// Result of looking at the next S2M packet.
type peekStatus int

const (
	peekEmpty      peekStatus = iota // nothing published
	peekIncomplete                   // the last published slot has NEXT set
	peekPacket                       // a complete packet is available
)

// maxChainBytes bounds the total length of one chained packet that the peer
// is willing to copy (to drop it) even when it is larger than -max-frame.
const maxChainBytes = 64 << 20

// peekPacket walks the S2M descriptors of the packet that starts at
// lastHead. It returns how many slots the packet uses and its total length.
// An error means the slave broke the protocol.
func (r *ringView) peekPacket(lastHead uint16) (st peekStatus, slots uint16, total int, err error) {
	avail := r.head() - lastHead
	if avail == 0 {
		return peekEmpty, 0, 0, nil
	}
	if int(avail) > r.size {
		return 0, 0, 0, fmt.Errorf("S2M head %d is %d slots ahead of the consumer position %d (ring size %d)",
			lastHead+avail, avail, lastHead, r.size)
	}
	for {
		if slots == avail {
			return peekIncomplete, 0, 0, nil
		}
		d := r.desc(lastHead + slots)
		slots++
		if err := r.checkBuffer(d, d.length); err != nil {
			return 0, 0, 0, fmt.Errorf("S2M slot %d: %v", lastHead+slots-1, err)
		}
		total += int(d.length)
		if total > maxChainBytes {
			return 0, 0, 0, fmt.Errorf("S2M packet at slot %d is longer than %d bytes", lastHead, maxChainBytes)
		}
		if d.flags&descFlagNext == 0 {
			return peekPacket, slots, total, nil
		}
	}
}

// Access to gomemif v0.1.0 internals (read only).

// gomemifRegions returns the mapped regions of a connected interface
// (Interface.regions[k].data).
func gomemifRegions(i *memif.Interface) ([][]byte, error) {
	v := reflect.ValueOf(i).Elem().FieldByName("regions")
	if !v.IsValid() || v.Kind() != reflect.Slice {
		return nil, fmt.Errorf("gomemif internals changed: Interface.regions not found")
	}
	out := make([][]byte, v.Len())
	for k := range out {
		f := v.Index(k).FieldByName("data")
		if !f.IsValid() || f.Type() != reflect.TypeOf([]byte(nil)) {
			return nil, fmt.Errorf("gomemif internals changed: memoryRegion.data not found")
		}
		out[k] = *(*[]byte)(unsafe.Pointer(f.UnsafeAddr()))
	}
	return out, nil
}

// gomemifRing returns the ring placement gomemif uses for a queue
// (Queue.ring.{region,offset,size}).
func gomemifRing(q *memif.Queue) (region, offset, size int, err error) {
	r := reflect.ValueOf(q).Elem().FieldByName("ring")
	if !r.IsValid() || r.Kind() != reflect.Pointer || r.IsNil() {
		return 0, 0, 0, fmt.Errorf("gomemif internals changed: Queue.ring not found")
	}
	r = r.Elem()
	get := func(name string) (int, error) {
		f := r.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Int {
			return 0, fmt.Errorf("gomemif internals changed: ring.%s not found", name)
		}
		return int(f.Int()), nil
	}
	if region, err = get("region"); err != nil {
		return
	}
	if offset, err = get("offset"); err != nil {
		return
	}
	size, err = get("size")
	return
}

// queueView builds a ringView for a gomemif queue of a connected interface.
func queueView(regions [][]byte, q *memif.Queue) (*ringView, error) {
	region, off, size, err := gomemifRing(q)
	if err != nil {
		return nil, err
	}
	v, err := newRingView(regions, region, off, size)
	if err != nil {
		return nil, err
	}
	if c := v.cookie(); c != memifCookie {
		return nil, fmt.Errorf("ring cookie is %#x, want %#x", c, memifCookie)
	}
	return v, nil
}

// gomemifDropUnmappedRegions works around a gomemif v0.1.0 teardown bug and
// is the only place where the peer modifies gomemif state.
//
// A master maps the slave's regions only when CONNECT arrives
// (Interface.connect). If the handshake ends earlier but after at least one
// ADD_REGION (the slave hangs up, sends a bad ADD_RING, ...),
// Interface.disconnect calls syscall.Munmap on a nil slice, gets EINVAL and
// returns early, before it clears Interface.cc. parseInit then rejects every
// later INIT for this id ("Invalid interface id"): the interface can never
// connect again. DisconnectedFunc runs before that loop, so here the
// never-mapped regions are removed from Interface.regions and their fds
// closed (gomemif would have closed them), which lets disconnect finish.
func gomemifDropUnmappedRegions(i *memif.Interface) (dropped int, err error) {
	f := reflect.ValueOf(i).Elem().FieldByName("regions")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return 0, fmt.Errorf("gomemif internals changed: Interface.regions not found")
	}
	regs := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	keep := 0
	for k := 0; k < regs.Len(); k++ {
		r := regs.Index(k)
		data, fd := r.FieldByName("data"), r.FieldByName("fd")
		if !data.IsValid() || !fd.IsValid() || fd.Kind() != reflect.Int {
			return dropped, fmt.Errorf("gomemif internals changed: memoryRegion fields not found")
		}
		if data.Len() == 0 {
			if fd.Int() >= 0 {
				syscall.Close(int(fd.Int()))
			}
			dropped++
			continue
		}
		if keep != k {
			regs.Index(keep).Set(r)
		}
		keep++
	}
	regs.SetLen(keep)
	return dropped, nil
}
