// Package demo is iwarp-peer's two demonstrations: Run, a client and a
// server of the whole stack in one process over loopback TCP, with every
// byte checked; and MPA, a walk through MPA connection setup and FPDU
// framing alone. Each writes its account of every step to an io.Writer.
package demo
