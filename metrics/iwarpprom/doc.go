// Package iwarpprom exports iwarp-go's counters to Prometheus: a
// prometheus.Collector over a metrics.Source (a device, closed queue pairs
// included, and the listeners added to it). It is a package of its own so
// that the core library does not depend on client_golang.
//
// Every name starts with iwarp_. A device's series:
//
//	iwarp_fpdus_sent_total{opcode}            FPDUs sent, by RDMAP opcode (metrics.OpcodeLabel)
//	iwarp_fpdus_received_total{opcode}        FPDUs received
//	iwarp_bytes_sent_total{opcode}            ULPDU bytes sent (DDP and RDMAP headers and payload)
//	iwarp_bytes_received_total{opcode}        ULPDU bytes received
//	iwarp_crc_errors_total                    FPDUs whose MPA CRC did not check
//	iwarp_terminates_sent_total{code,name}    Terminates sent, by code ("0x1100") and its name
//	iwarp_terminates_received_total{code,name}
//	iwarp_reads_queued_total                  the peers' Read Requests taken into the inbound queue (IRD)
//	iwarp_reads_issued_total                  Read Requests sent (ORD)
//	iwarp_reads_held_total                    inbound Reads held back by a region's hooks
//	iwarp_connections_total                   connections established
//	iwarp_connections_closed_total            connections ended
//	iwarp_connections_open                    established and not yet ended (a gauge)
//	iwarp_setup_seconds_total                 time the setups took (TCP connect or accept to running)
//	iwarp_rejects_received_total              connection attempts the peer rejected
//
// A listener's, labelled by its address:
//
//	iwarp_listener_accepted_total{listener}        TCP connections accepted
//	iwarp_listener_refused_total{listener,reason}  turned away, by metrics.RefusalReasons
//
// A pmemsink target's (metrics.Source.AddSink), labelled by its name:
//
//	iwarp_pmem_sink_info{sink,mode,durable}  1: the persistence mode, and whether persists are durable
//	iwarp_pmem_persists_total{sink}          persist passes (a fence, or a series of msyncs, per flush)
//	iwarp_pmem_persisted_bytes_total{sink}   bytes of the ranges persisted (before rounding)
//	iwarp_pmem_persist_errors_total{sink}    persists that failed
//	iwarp_pmem_persist_seconds_total{sink}   time the persists took (÷ persists: mean latency)
//
// With PerQueuePair, each live queue pair's series too, labelled by qpn and
// remote: iwarp_qp_fpdus_sent_total, iwarp_qp_fpdus_received_total,
// iwarp_qp_bytes_sent_total, iwarp_qp_bytes_received_total,
// iwarp_qp_crc_errors_total, iwarp_qp_terminates_sent_total,
// iwarp_qp_terminates_received_total, iwarp_qp_reads_queued_total,
// iwarp_qp_reads_issued_total, iwarp_qp_reads_held_total and the gauge
// iwarp_qp_setup_seconds. They are off by default: ten thousand queue
// pairs would make hundreds of thousands of series. A queue pair's series
// end when it closes; the device's totals keep what it counted.
//
// The opcodes RFC 5040 defines are reported always, zero or not; other
// opcodes and Terminate codes once they occur.
package iwarpprom
