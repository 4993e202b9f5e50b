# Turns a text file into a C++ source holding it as a string constant.
# Usage: cmake -DIN=file -DOUT=file.cpp -DSYMBOL=name -P embed.cmake
file(READ "${IN}" content)
file(WRITE "${OUT}" "// Generated from ${IN}; do not edit.\nnamespace hostprep {\nextern const char* const ${SYMBOL};\nconst char* const ${SYMBOL} = R\"hostprep_embed(${content})hostprep_embed\";\n}\n")
