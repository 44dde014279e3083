# kwb's bash completion. The words come from the kwb being completed
# (kwb.help.words, the one description of its commands and options), so
# they never drift from it.
_kwb_words() {
    "$1" -e "for _, w in ipairs(require('kwb.help').words('$2')) do print(w) end" 2>/dev/null
}
_kwb() {
    local kwb=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$(_kwb_words "$kwb" '')" -- "$cur") $(compgen -f -X '!*.lua' -- "$cur"))
        return
    fi
    case ${COMP_WORDS[1]} in
    cache | export | report | doctor | demo | worker)
        if [ "${COMP_WORDS[1]}" != cache ] || [ "$COMP_CWORD" -eq 2 ]; then
            COMPREPLY=($(compgen -W "$(_kwb_words "$kwb" "${COMP_WORDS[1]}")" -- "$cur"))
        fi
        [[ $cur == -* ]] || COMPREPLY+=($(compgen -f -- "$cur")) ;;
    *.lua)
        COMPREPLY=($(compgen -W "$(_kwb_words "$kwb" run)" -- "$cur")) ;;
    *)
        COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}
complete -F _kwb kwb
