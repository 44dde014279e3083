-- tests/recipes/script.lua: a file that returns nothing is an ordinary
-- script, whatever words follow it.
print("script", select("#", ...), ...)
