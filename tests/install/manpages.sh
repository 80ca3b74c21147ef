# The man pages and the usmc command agree; sourced by tests/install/run.sh, which defines
# `check` and USMC.
#
# Every man/usmc-SUB.1 documents `usmc SUB`: each option that `usmc SUB --help` lists has an
# entry in the page's OPTIONS section and each entry there is an option the help lists, and
# `usmc --help` names SUB. The formats compared:
#   help:  an option line starts with spaces and a dash; its options are the words before the
#          first two spaces that start with a dash ("  -r, --recv-ring SIZE  receive ring")
#   page:  in `.SH OPTIONS`, each entry is `.TP` followed by `.B` and the options, then their
#          arguments (".B \-r, \-\-recv\-ring \fISIZE\fP")
#   usmc --help: a line `  SUB  summary` per command

help_options() {
    "$USMC" "$1" --help 2>/dev/null | awk '/^ +-/ {
        sub(/^ +/, ""); sub(/  .*/, ""); gsub(/,/, " ")
        for (i = 1; i <= NF; i++) if ($i ~ /^-/) print $i
    }' | sort -u
}

page_options() {
    awk '/^\.SH/ { gsub(/"/, ""); opts = ($2 == "OPTIONS"); prev = ""; next }
        opts && prev == ".TP" && /^\.B / {
            line = substr($0, 4)
            gsub(/\\f[BIRP]/, "", line); gsub(/\\-/, "-", line); gsub(/,/, " ", line)
            n = split(line, w, " ")
            for (i = 1; i <= n; i++) if (w[i] ~ /^-/) print w[i]
        }
        { prev = $0 }' "$1" | sort -u
}

man_checks() {
    local page sub help_out
    for page in man/usmc-*.1; do
        sub=${page#man/usmc-}
        sub=${sub%.1}
        help_out=$("$USMC" "$sub" --help 2>/dev/null)
        check "usmc $sub --help: status 0, on stdout" \
            '"$USMC" "$sub" --help >/dev/null 2>&1 && [ -n "$help_out" ]'
        diff <(help_options "$sub") <(page_options "$page") >"$WORK/man.diff"
        check "usmc $sub: --help (<) and $page OPTIONS (>) list the same options" \
            '[ ! -s "$WORK/man.diff" ] && [ -n "$(help_options "$sub")" ]' "$WORK/man.diff"
        check "usmc --help names $sub" 'grep -q "^  $sub " <<<"$("$USMC" --help)"'
    done
    if command -v groff >/dev/null; then
        groff -man -ww -z man/*.[0-9] >"$WORK/groff.log" 2>&1
        check "the man pages format without warnings" '[ ! -s "$WORK/groff.log" ]' "$WORK/groff.log"
    fi
}
