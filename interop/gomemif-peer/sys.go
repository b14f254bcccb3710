package main

import (
	"syscall"
	"time"
	"unsafe"
)

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1

// waitReadable waits up to timeout for fd to become readable.
func waitReadable(fd int, timeout time.Duration) bool {
	pfd := pollFd{fd: int32(fd), events: pollIn}
	ts := syscall.NsecToTimespec(int64(timeout))
	n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1,
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return errno == 0 && n > 0 && pfd.revents&pollIn != 0
}

// drainEventFd clears an eventfd counter without ever blocking, even if the
// slave created the eventfd without EFD_NONBLOCK (the file status flags are
// shared with the slave, so the peer must not change them).
func drainEventFd(fd int) {
	if fd < 0 || !waitReadable(fd, 0) {
		return
	}
	var b [8]byte
	_, _ = syscall.Read(fd, b[:])
}
