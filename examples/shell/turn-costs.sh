#!/usr/bin/env bash
# An example subscriber of pisyncd that needs no Go: a line each time an
# assistant turn ends in a pi session (on this machine and, with a hub, on
# every machine of the team), with what the turn cost. The same output as
# examples/notify-go. Needs the running daemon and jq.
#
#   examples/shell/turn-costs.sh                 from now on
#   examples/shell/turn-costs.sh --from-start    everything stored first
#
# `pisyncd tail --json` prints one JSON object a line as the daemon's
# projection applies each entry (session, node, entryId, type, entry: the
# line pi wrote, parsed). A turn is the assistant messages since the last
# user message; it ends with an assistant message whose stopReason is not
# "toolUse". Pipe the output into notify-send, curl, a file...
#
# PISYNCD names the binary when it is not `pisyncd` on the PATH (e.g.
# PISYNCD=./pisyncd after `go build -o pisyncd ./cmd/pisyncd`). The script
# fails as pisyncd does (no daemon, no binary): pipefail, not jq's status.
set -euo pipefail

"${PISYNCD:-pisyncd}" tail --json --type message "$@" |
  jq -nr --unbuffered '
    foreach (inputs | select(.entry.message != null)) as $e (
      {sums: {}, done: null};
      $e.entry.message as $m
      | .done = null
      | if $m.role == "user" then .sums[$e.session] = 0
        elif $m.role == "assistant" then
          .sums[$e.session] += ($m.usage.cost.total // 0)
          | if $m.stopReason != "toolUse"
            then .done = {e: $e, cost: ((.sums[$e.session] * 1e6 | round) / 1e6)} | .sums[$e.session] = 0
            else . end
        else . end;
      .done | select(. != null)
      | "turn ended: session \(.e.session) entry \(.e.entryId) on \(.e.node): \(.e.entry.message.stopReason), $\(.cost) (\(.e.entry.message.provider)/\(.e.entry.message.model))"
    )'
