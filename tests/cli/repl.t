# The REPL on a pseudo-terminal: bare expressions print (tables pretty), input
# continues while a chunk is incomplete, errors carry a traceback, Ctrl-C stops
# running code and drops a half-typed line, Tab completes fields, Ctrl-D exits.
$ rm -rf build/repl && mkdir -p build/repl
$ build/ttydrive ./kwb --cache build/repl/kwb.db -- 'expect:> ' 'send:1 + 1\r' 'expect:> ' 'send:{ b = 2, a = { 1, 2 } }\r' 'expect:> ' 'send:\x04'
kwb 0.1.0 · Lua 5.4 · cache build/repl/kwb.db
> 1 + 1
2
> { b = 2, a = { 1, 2 } }
{ a = { 1, 2 }, b = 2 }
> ^D

[tty exit 0]
$ build/ttydrive ./kwb --cache build/repl/kwb.db -- 'expect:> ' 'send:function f(x)\r' 'expect:>> ' 'send:return x * 2 end\r' 'expect:> ' 'send:f(21), "two"\r' 'expect:> ' 'send:\x04'
kwb 0.1.0 · Lua 5.4 · cache build/repl/kwb.db
> function f(x)
>> return x * 2 end
> f(21), "two"
42	"two"
> ^D

[tty exit 0]
$ build/ttydrive ./kwb --cache build/repl/kwb.db -- 'expect:> ' 'send:while true do end\r' 'wait:300' 'send:\x03' 'expect:> ' 'send:x = {\r' 'expect:>> ' 'send:\x03' 'expect:> ' 'send:print("still here")\r' 'expect:> ' 'send:\x04'
kwb 0.1.0 · Lua 5.4 · cache build/repl/kwb.db
> while true do end
^Ckwb: interrupted!
stack traceback:
	stdin:1: in main chunk
	[C]: in ?
> x = {
>> 
^C
> print("still here")
still here
> ^D

[tty exit 0]
$ build/ttydrive ./kwb --cache build/repl/kwb.db -- 'expect:> ' 'send:kwb.host.compi\t' 'wait:200' 'send: ~= nil\r' 'expect:> ' 'send:error("boom")\r' 'expect:> ' 'send:\x04'
kwb 0.1.0 · Lua 5.4 · cache build/repl/kwb.db
> kwb.host.compi> kwb.host.compile ~= nil
true
> error("boom")
kwb: stdin:1: boom
stack traceback:
	[C]: in function 'error'
	stdin:1: in main chunk
	[C]: in ?
> ^D

[tty exit 0]
# History is kept across sessions in $KWB_HISTORY (~/.kwb_history by default).
$ rm -f "$KWB_HISTORY"; build/ttydrive ./kwb --cache build/repl/kwb.db -- 'expect:> ' 'send:print(1)\r' 'expect:> ' 'send:\x04' >/dev/null; build/ttydrive ./kwb --cache build/repl/kwb.db -- 'expect:> ' 'send:\x1b[A' 'wait:200' 'send:\r' 'expect:> ' 'send:\x04'
kwb 0.1.0 · Lua 5.4 · cache build/repl/kwb.db
> > print(1)
1
> ^D

[tty exit 0]
# help(x) reads the one description (kwb/help/api.lua); one of kwb's functions prints as its signature
$ build/ttydrive ./kwb --cache build/repl/kwb.db -- 'expect:> ' 'send:kwb.figures.time\r' 'expect:> ' 'send:help(kwb.figures.time)\r' 'expect:> ' 'send:help "nope"\r' 'expect:> ' 'send:type(print)\r' 'expect:> ' 'send:\x04'
kwb 0.1.0 · Lua 5.4 · cache build/repl/kwb.db
> kwb.figures.time
function kwb.figures.time(seconds) -> text
> help(kwb.figures.time)
kwb.figures.time(seconds) -> text
  A time with a unit: "1.250 s", "3.100 ms", "412.0 us", "80 ns"; "-" for nil.
> help "nope"
no help for 'nope' (help() lists what there is)
> type(print)
"function"
> ^D

[tty exit 0]
