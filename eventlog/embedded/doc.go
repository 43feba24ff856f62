// Package embedded runs the nats-server that every pisyncd daemon carries:
// JetStream on local disk in the state dir, reached by the daemon through
// in-process connections and, only when configured, by local tools through a
// loopback listener that requires generated credentials.
//
// Embedding nats-server has sharp edges that this package exists to file
// off (see shared/research/nats-design.md §6):
//
//   - The server does not lock its store directory, so two daemons on one
//     state dir would corrupt it. Start takes an exclusive flock on
//     StateDir/lock first and fails at once if another process holds it.
//   - Zero JetStream limits mean "75% of RAM / free disk", not "off", so
//     limits are always explicit.
//   - NoSigs, or the library calls os.Exit on SIGINT/SIGTERM.
//   - Fatal start-up errors go through Logger.Fatalf, which by default exits
//     the process and with NoLog is silent. Our logger records them instead,
//     and Start checks JetStreamEnabled after the server is ready.
//   - Restarting JetStream alone (ShutdownJetStream, then EnableJetStream)
//     leaves the old $JS.API.> subscription behind, a data race inside the
//     server. StoreWatch restarts the whole server.Server instead, and the
//     in-process connections follow it to the new one (Connect).
//
// Layout of the state dir owned here:
//
//	StateDir/lock                 flock target; holds the owner's pid
//	StateDir/jetstream/           JetStream file store (0700)
//	StateDir/client-context.json  listener credentials (0600), only with Listen
//	StateDir/client.nk            the listener reader's nkey seed (0600), beside them
//	StateDir/write-probe          for a moment, while StoreWatch tests a full disk
//
// The credentials file is a nats CLI context, so local tools can use it
// directly: nats --context $STATE_DIR/client-context.json sub 'pi.evt.>'.
// Its reader is in an account of its own that can only receive each stored
// message of the streams it reads and direct-get them (listenerAccounts).
package embedded
