// Placeholder translation unit so the checks library exists before its first check lands.
