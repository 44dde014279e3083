# kwb's bash completion. The commands, the cache's subcommands and the run
# options come from the kwb being completed, so they never drift from it.
_kwb() {
    local kwb=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} words
    if [ "$COMP_CWORD" -eq 1 ]; then
        words=$("$kwb" -e 'for _, c in ipairs(require("kwb.cli").commands) do print(c.name) end' 2>/dev/null)
        COMPREPLY=($(compgen -W "$words --cache --help --version -e" -- "$cur") $(compgen -f -X '!*.lua' -- "$cur"))
        return
    fi
    case ${COMP_WORDS[1]} in
    cache)
        if [ "$COMP_CWORD" -eq 2 ]; then
            words=$("$kwb" cache --help 2>/dev/null | awk '/^  [a-z]/ { print $1 }')
            COMPREPLY=($(compgen -W "$words --help" -- "$cur"))
        fi ;;
    *.lua)
        words=$("$kwb" -e 'for _, o in ipairs(require("kwb.cli").run_options) do print((o[1]:match("^%S+"))) end' 2>/dev/null)
        COMPREPLY=($(compgen -W "$words --help" -- "$cur")) ;;
    *)
        COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}
complete -F _kwb kwb
