// Package siwpeer is the entry point of the iwarp-go/siw-peer container
// image: one `docker run` gives a real Linux soft-iWARP (siw) endpoint with
// rdma-core's programs, for iwarp-go (or any iWARP stack) on the Docker host
// to talk to.
//
// By default it boots the interop suite's Debian guest under QEMU (TCG, so
// no KVM and no siw-capable host kernel are needed) through package lab,
// runs one guest program (rping, iwtest, perftest, or a shell) and exits
// with that program's status. Addresses on the command line are the
// host's view: 127.0.0.1 is the Docker host (the container runs with
// --network host), and the entry point rewrites it into the address the
// guest reaches the host by. A server's port is forwarded from the same
// port on the host's 127.0.0.1, and the entry point prints
// "READY <command> 127.0.0.1:<port>" once the guest program listens; QEMU
// accepts connections to a forwarded port even when nothing listens, so
// clients wait for that line instead of probing.
//
// With --host-siw it uses the host kernel's siw module instead (a
// privileged container on kernels that ship siw.ko) and runs the same
// programs from the guest's userspace without QEMU.
package siwpeer
