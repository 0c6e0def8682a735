// Package lab drives a Linux soft-iWARP (siw) peer that runs in a Debian
// kernel under QEMU (TCG), for interoperability tests of iwarp-go.
//
// The guest is built by interop/siw/build.sh. [Boot] starts QEMU once and
// waits for the guest agent; many test sessions then run on that one boot.
// Host and guest talk only through files on a 9p share: the host drops a job
// description into cmd/, the agent (see [ServeAgent], run inside the guest)
// starts it and reports through res/. Every flag file is written under a
// temporary name and renamed, so neither side ever reads half a flag. The
// share is never coordinated through TCP connects: QEMU's user networking
// completes a host-side connect to a forwarded port even when nothing
// listens in the guest.
//
// Importing the package runs nothing; it is plain Go so that it builds and
// vets in every CI run. The scenario tests that use it carry the build tag
// interop.
package lab
