# Writes the file IN as a C string constant named VAR to OUT.
file(READ ${IN} text HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${text}")
file(WRITE ${OUT}
  "/* Generated from ${IN}; do not edit. */\n"
  "const char ${VAR}[] = {${bytes} 0x00};\n")
