#!/usr/bin/env bash
# Writes one gzip'd man page of the flurry CLI with help2man, from the CLI's own help.
# Usage: tools/man-page.sh HELP2MAN FLURRY VERSION OUT.1.gz [VERB]
#   without VERB: flurry.1 from `flurry --help`; with VERB: flurry-VERB.1 from `flurry VERB --help`
#   followed by the help of each of its sub-verbs (flurry nodes list, flurry nodes release, ...).
# The help is taken in a fixed environment, so that the defaults it prints are the installed
# service's (data directory /var/lib/flurry) and not the builder's home or FLURRY_* settings.
set -euo pipefail

help2man=$1 flurry=$2 version=$3 out=$4 verb=${5:-}

if [[ ${_FLURRY_MAN_HELP:-} == 1 ]]; then
  # Called back by help2man as `man-page.sh ... VERB` (its --help-option): print the help.
  if [[ -z $verb ]]; then
    "$flurry" --help
    exit 0
  fi
  # Sub-verbs: the names under "Subcommands:", up to the first blank line.
  subs=$("$flurry" "$verb" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF && !/:$/ {print $1}')
  if [[ -z $subs ]]; then
    "$flurry" "$verb" --help
    exit 0
  fi
  # The verb's help without its pointer to the sub-verbs' --help (they follow), then one section
  # per sub-verb headed by its synopsis ("flurry nodes list [OPTIONS]:"), its summary and help.
  "$flurry" "$verb" --help | grep -v "^Run 'flurry VERB --help'"
  for sub in $subs; do
    help=$("$flurry" "$verb" "$sub" --help)
    printf '\n%s:\n' "$(sed -n 's/^Usage: //p' <<<"$help" | head -1)"
    printf '  %s\n' "$(head -1 <<<"$help")"  # indented: help2man's sub-section
    # Its own "Options:" heading named (help2man would fold a plain one into OPTIONS above).
    sed "1,2d; /^Run .flurry VERB --help./d; s/^Options:\$/$verb $sub options:/;
         s/^Positionals:\$/$verb $sub arguments:/" <<<"$help"
  done
  exit 0
fi

name=flurry
summary=$("$flurry" --help | head -1 | sed 's/^flurry: //')
if [[ -n $verb ]]; then
  name=flurry-$verb
  summary=$("$flurry" --help | awk -v v="$verb" '$1 == v {$1 = ""; sub(/^ +/, ""); print; exit}')
  [[ -n $summary ]] || { echo "man-page.sh: 'flurry --help' lists no verb '$verb'" >&2; exit 1; }
fi

# SEE ALSO: flurry(1) lists every verb's page, each verb's page points back to flurry(1).
include=$(mktemp)
trap 'rm -f "$include"' EXIT
if [[ -z $verb ]]; then
  see_also=$("$flurry" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF && !/:$/ {print $1}' |
    sed 's/.*/.BR flurry-& (1)/' | sed '$!s/$/,/')
else
  see_also='.BR flurry (1)'
fi
printf '[SEE ALSO]\n%s\n' "$see_also" >"$include"

page=${out%.gz}
mkdir -p "$(dirname "$out")"
env -i PATH=/usr/bin:/bin LC_ALL=C.UTF-8 HOME=/nonexistent XDG_STATE_HOME=/var/lib \
  ${SOURCE_DATE_EPOCH:+SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH} _FLURRY_MAN_HELP=1 \
  "$help2man" --no-info --section=1 --manual="flurry manual" --source="flurry $version" \
  --version-string="$name $version" --name="$summary" --include="$include" \
  --help-option="$help2man $flurry $version $out $verb" --output="$page" "$0"
gzip -9nf "$page"
