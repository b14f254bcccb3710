module veclane.dev/interop/gomemif-peer

go 1.22

require go.fd.io/govpp/extras v0.1.0
