// Package ctl is the typed client of the veclane daemon's control API: one JSON object per
// line on its control socket (`ctl.sock`), a reply line for every request line. Every request
// is a Go struct (requests.go) whose fields carry the JSON names of the daemon's serde schema
// (crates/api/src/lib.rs), paired at compile time with the reply it gets (replies.go); Call
// sends one and decodes its reply, and the methods of Client wrap the requests the CNI
// plugin and the node agent make. `veclane ctl` is the same API as text.
package ctl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// APIVersion is the control API version this client speaks (the daemon's api::API_VERSION),
// sent as "api" in every request and expected in every reply.
const APIVersion = 1

// Client is a connection to one daemon.
type Client struct {
	conn net.Conn
	r    *bufio.Reader
	path string
}

// Dial connects to the control socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", path, err)
	}
	return &Client{conn: c, r: bufio.NewReader(c), path: path}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Gone reports whether err says there is no daemon at all (no socket, nobody listening):
// the case in which a deletion has nothing left to delete.
func Gone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// ErrorCode is the machine-readable reason of an error reply (`"code"`).
type ErrorCode string

const (
	// CodeVersion: the client and the daemon speak different control API versions.
	CodeVersion ErrorCode = "version"
	// CodeMalformed: the request line could not be parsed, or is too long.
	CodeMalformed ErrorCode = "malformed"
	// CodeNoInterface: the request names an interface that does not exist.
	CodeNoInterface ErrorCode = "no_interface"
	// CodeRefused: any other request the daemon refuses (bad configuration, conflicts).
	CodeRefused ErrorCode = "refused"
	// CodeInternal: the daemon failed (a worker did not answer, a write failed).
	CodeInternal ErrorCode = "internal"
)

// Error is an error reply of the daemon: a request it refused or failed, with its code (""
// from a daemon older than codes) and its reason. The connection is still good.
type Error struct {
	Code    ErrorCode
	Message string
}

func (e *Error) Error() string { return "daemon: " + e.Message }

// Refused reports whether err is an error reply of the daemon (as opposed to a connection
// that failed, or a reply that could not be read).
func Refused(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// NoInterface reports whether err is the daemon saying that an interface does not exist.
func NoInterface(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	if e.Code != "" {
		return e.Code == CodeNoInterface
	}
	// A daemon older than error codes sends none: its message is the only sign, and every
	// such message of it starts "no interface" ("no interface named \"x\" (have: ...)").
	// Only then is the text read; a daemon that sends codes is never second-guessed.
	return strings.HasPrefix(e.Message, "no interface")
}

// Request is a request of the control API whose reply is an R: a struct whose fields are the
// request's JSON fields, and whose RequestName is its "request" tag. Only this package's
// types implement it.
type Request[R Reply] interface {
	RequestName() string
	// reply is R's zero value, for Call to decode into: it pairs the request with its reply.
	reply() R
}

// Reply is a reply of the control API: ReplyName is its "reply" tag.
type Reply interface {
	ReplyName() string
}

// Call sends a request and decodes its reply. An error reply is an *Error; a reply of
// another kind than the request's, or of another API version, is an error too.
func Call[R Reply](c *Client, req Request[R]) (R, error) {
	out := req.reply()
	line, err := c.roundTrip(req.RequestName(), req)
	if err != nil {
		return out, err
	}
	var head struct {
		Reply   string    `json:"reply"`
		API     *int      `json:"api"`
		Code    ErrorCode `json:"code"`
		Message string    `json:"message"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return out, fmt.Errorf("daemon at %s: a reply that is not JSON: %w", c.path, err)
	}
	if head.Reply == "error" {
		return out, &Error{Code: head.Code, Message: head.Message}
	}
	if head.API == nil || *head.API != APIVersion {
		got := "none"
		if head.API != nil {
			got = fmt.Sprint(*head.API)
		}
		return out, fmt.Errorf("daemon at %s speaks control API %s and this client speaks %d: use matching builds", c.path, got, APIVersion)
	}
	if head.Reply != out.ReplyName() {
		return out, fmt.Errorf("daemon at %s answered %s with a %q reply, not %q", c.path, req.RequestName(), head.Reply, out.ReplyName())
	}
	if err := json.Unmarshal(line, &out); err != nil {
		return out, fmt.Errorf("daemon at %s: the %s reply to %s: %w", c.path, head.Reply, req.RequestName(), err)
	}
	return out, nil
}

// roundTrip sends req as request `name` with the API version, and reads the reply line.
func (c *Client) roundTrip(name string, req any) ([]byte, error) {
	line, err := encode(name, req)
	if err != nil {
		return nil, err
	}
	if err := c.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(line); err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", c.path, err)
	}
	reply, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("daemon at %s: reading the reply to %s: %w", c.path, name, err)
	}
	return reply, nil
}

// encode is a request's line: `{"request":NAME,"api":APIVersion,FIELDS...}` and a newline,
// the fields being req's (the daemon's internally tagged Request enum).
func encode(name string, req any) ([]byte, error) {
	fields, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if len(fields) < 2 || fields[0] != '{' {
		return nil, fmt.Errorf("request %s: %T is not a JSON object", name, req)
	}
	tag, _ := json.Marshal(name)
	line := fmt.Appendf(nil, `{"request":%s,"api":%d`, tag, APIVersion)
	if len(fields) > 2 {
		line = append(line, ',')
	}
	line = append(line, fields[1:]...)
	return append(line, '\n'), nil
}
