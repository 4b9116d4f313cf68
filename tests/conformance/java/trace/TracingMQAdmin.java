// Ours (not RocketMQ's): runs an mqadmin sub command exactly as MQAdminStartup.main0 does, but
// with an RPCHook that prints every request (address, code, ext fields, body) and every
// response (code, remark, ext fields, body) to stderr as "TRACE>" / "TRACE<" lines.
// MQAdminStartup.main0 ignores its rpcHook argument (it passes AclUtils.getAclRPCHook(...)),
// so this repeats its few lines of dispatch.
package org.apache.rocketmq.tools.command;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.joran.JoranConfigurator;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.TreeMap;
import org.apache.commons.cli.CommandLine;
import org.apache.commons.cli.Options;
import org.apache.commons.cli.PosixParser;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.protocol.RequestCode;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.srvutil.ServerUtil;
import org.slf4j.LoggerFactory;

public class TracingMQAdmin {
    static final int MAX_BODY = Integer.getInteger("trace.maxBody", 2500);

    static String codeName(int code) {
        for (java.lang.reflect.Field f : RequestCode.class.getFields()) {
            try {
                if (f.getType() == int.class && f.getInt(null) == code) {
                    return f.getName();
                }
            } catch (IllegalAccessException ignored) {
            }
        }
        return "?";
    }

    static String body(byte[] b) {
        if (b == null) {
            return "null";
        }
        String s = new String(b, StandardCharsets.UTF_8);
        return b.length + "B " + (s.length() > MAX_BODY ? s.substring(0, MAX_BODY) + "..." : s);
    }

    // the custom header's fields (extFields are only filled from it when the request is encoded,
    // after doBeforeRequest)
    static String header(RemotingCommand request) {
        Object h = request.readCustomHeader();
        TreeMap<String, Object> out = new TreeMap<>();
        if (request.getExtFields() != null) {
            out.putAll(request.getExtFields());
        }
        if (h != null) {
            for (Class<?> c = h.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
                for (java.lang.reflect.Field f : c.getDeclaredFields()) {
                    if (java.lang.reflect.Modifier.isStatic(f.getModifiers())) {
                        continue;
                    }
                    try {
                        f.setAccessible(true);
                        Object v = f.get(h);
                        if (v != null) {
                            out.put(f.getName(), v);
                        }
                    } catch (Exception ignored) {
                    }
                }
            }
            return h.getClass().getSimpleName() + out;
        }
        return out.toString();
    }

    static final RPCHook HOOK = new RPCHook() {
        @Override
        public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
            System.err.printf("TRACE> %s code=%d(%s) header=%s body=%s%n", remoteAddr, request.getCode(),
                codeName(request.getCode()), header(request), body(request.getBody()));
        }

        @Override
        public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
            if (response == null) {
                System.err.printf("TRACE< %s code=%d(%s) -> null response%n", remoteAddr, request.getCode(),
                    codeName(request.getCode()));
                return;
            }
            System.err.printf("TRACE< %s for %d(%s): code=%d remark=%s ext=%s body=%s%n", remoteAddr,
                request.getCode(), codeName(request.getCode()), response.getCode(), response.getRemark(),
                response.getExtFields() == null ? "{}" : new TreeMap<>(response.getExtFields()),
                body(response.getBody()));
        }
    };

    public static void main(String[] args) throws Exception {
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        MQAdminStartup.initCommand();
        String home = System.getProperty(MixAll.ROCKETMQ_HOME_PROPERTY, System.getenv(MixAll.ROCKETMQ_HOME_ENV));
        LoggerContext lc = (LoggerContext) LoggerFactory.getILoggerFactory();
        JoranConfigurator configurator = new JoranConfigurator();
        configurator.setContext(lc);
        lc.reset();
        configurator.doConfigure(home + "/conf/logback_tools.xml");
        SubCommand cmd = null;
        for (SubCommand c : MQAdminStartup.subCommandList) {
            if (c.commandName().equalsIgnoreCase(args[0])
                || (c.commandAlias() != null && c.commandAlias().equalsIgnoreCase(args[0]))) {
                cmd = c;
            }
        }
        if (cmd == null) {
            System.out.printf("The sub command %s not exist.%n", args[0]);
            return;
        }
        Options options = ServerUtil.buildCommandlineOptions(new Options());
        CommandLine commandLine = ServerUtil.parseCmdLine("mqadmin " + cmd.commandName(),
            Arrays.copyOfRange(args, 1, args.length), cmd.buildCommandlineOptions(options), new PosixParser());
        if (commandLine == null) {
            return;
        }
        if (commandLine.hasOption('n')) {
            System.setProperty(MixAll.NAMESRV_ADDR_PROPERTY, commandLine.getOptionValue('n'));
        }
        try {
            cmd.execute(commandLine, options, HOOK);
        } catch (Exception e) {
            e.printStackTrace();
        }
    }
}
