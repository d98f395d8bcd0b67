#!/usr/bin/env bash
# Mutation testing of the protocol's code, by hand (docs/protocol.md, "Mutation
# testing"): cargo mutants plants one small bug at a time in the rules
# (argo-results-rules) or in the controller's decision code (argo-results-client's
# controller.rs), and runs the crate's own tests against each (stage one); then the model
# runs against each survivor (stage two). Both stages print what survives. It edits the
# source in place while it runs: use a clean clone, not a tree with work in it.
#
#   tests/model/mutants.sh rules        # about 10 min for stage one, 75 s a survivor
#   tests/model/mutants.sh decisions    # about 3 min for stage one
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "mutants.sh: the tree has changes; run it in a clean clone" >&2
    exit 2
fi
case "${1:-}" in
    rules) stage_one=(-p argo-results-rules) ;;
    # The decision functions (lines 80-179) sit above the Reconciler, whose calls the e2e
    # suite tests; cargo-mutants 27.1 applies no --re to its field deletions, so seven of
    # the Reconciler's come along.
    decisions) stage_one=(-p argo-results-client -f executor-client/src/controller.rs
        --re 'controller\.rs:(8[0-9]|9[0-9]|1[0-7][0-9]):[0-9]+: ') ;;
    *) echo "usage: tests/model/mutants.sh rules|decisions" >&2; exit 2 ;;
esac
# Stage one exits non-zero when a mutant survives: stage two is what decides.
cargo mutants "${stage_one[@]}" --in-place --no-shuffle --timeout 300 || true
cargo test -q -p argo-results-model --test model --no-run
survivors=$(python3 -c '
import json
for outcome in json.load(open("mutants.out/outcomes.json"))["outcomes"]:
    if outcome["summary"] == "MissedMutant":
        print(outcome["diff_path"])')
missed=0
for diff in $survivors; do
    file=$(head -1 "mutants.out/$diff" | sed 's/^--- //')
    name=$(sed -n 2p "mutants.out/$diff" | sed 's/^+++ //')
    patch -s "$file" < "mutants.out/$diff"
    if cargo test -q -p argo-results-model --test model protocol:: > /dev/null 2>&1; then
        echo "survives the model: $file: $name"
        missed=$((missed + 1))
    else
        echo "caught by the model: $file: $name"
    fi
    patch -s -R "$file" < "mutants.out/$diff"
done
echo "stage two: $(echo "$survivors" | grep -c . || true) survivors of stage one, $missed missed by the model"
